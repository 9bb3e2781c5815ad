#include "agent/store/iteration_log_codec.h"

#include <bit>
#include <cstring>

namespace seqpoint::daemon {
namespace {

constexpr char kMagic[4] = {'S', 'P', 'I', 'L'};
constexpr uint32_t kCodecVersion = 2;  // what this build writes
constexpr size_t kHeaderBytes = 8;
constexpr size_t kEntryBytesV1 = 40;  // codec version 1 (schema v6): no flags
constexpr size_t kEntryBytes = 44;    // version 2: u32 flags after time_ns

// Format 0's host layout after iteration times were logged (schema 3-5): 40 bytes.
struct LegacyEntry {
  int32_t pid;
  uint32_t seq_len;
  uint64_t iter;
  uint32_t batch;
  uint32_t repeat;
  double tokens;
  double time_ns;
};
static_assert(sizeof(LegacyEntry) == 40, "format 0 chunks were memcpy'd in this layout");

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

Status DecodeLegacy(std::string_view blob, size_t n, const std::string& what,
                    std::vector<IterationLogEntry>* out) {
  if (n > 0 && blob.size() == n * sizeof(IterationLogEntryV2)) {
    // A chunk written before iteration times were logged.
    for (size_t i = 0; i < n; ++i) {
      IterationLogEntryV2 e;
      std::memcpy(&e, blob.data() + i * sizeof e, sizeof e);
      out->push_back({e.pid, e.seq_len, e.iter, e.batch, e.repeat, e.tokens, 0});
    }
    return Status::Ok();
  }
  if (blob.size() != n * sizeof(LegacyEntry)) {
    return InvalidArgument(what + ": " + std::to_string(blob.size()) + " bytes for " +
                           std::to_string(n) + " entries of 40 or 32 bytes (damaged)");
  }
  out->reserve(out->size() + n);
  for (size_t i = 0; i < n; ++i) {
    LegacyEntry e;
    std::memcpy(&e, blob.data() + i * sizeof e, sizeof e);
    out->push_back({e.pid, e.seq_len, e.iter, e.batch, e.repeat, e.tokens, e.time_ns, 0});
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeIterationLog(const std::vector<IterationLogEntry>& entries) {
  std::string out;
  out.reserve(kHeaderBytes + entries.size() * kEntryBytes);
  out.append(kMagic, sizeof kMagic);
  PutLe(out, kCodecVersion, 4);
  for (const IterationLogEntry& e : entries) {
    PutLe(out, static_cast<uint32_t>(e.pid), 4);
    PutLe(out, e.seq_len, 4);
    PutLe(out, e.iter, 8);
    PutLe(out, e.batch, 4);
    PutLe(out, e.repeat, 4);
    PutLe(out, std::bit_cast<uint64_t>(e.tokens), 8);
    PutLe(out, std::bit_cast<uint64_t>(e.time_ns), 8);
    PutLe(out, e.flags, 4);
  }
  return out;
}

Status DecodeIterationLog(int format, std::string_view blob, int64_t entries,
                          const std::string& what, std::vector<IterationLogEntry>* out) {
  if (entries < 0) return InvalidArgument(what + ": a negative entry count (damaged)");
  const size_t n = static_cast<size_t>(entries);
  if (format == kIterationLogLegacyFormat) return DecodeLegacy(blob, n, what, out);
  if (format != kIterationLogFormat) {
    return Unsupported(what + ": iteration-log format " + std::to_string(format) +
                       ", this seqpointd reads formats 0-" + std::to_string(kIterationLogFormat) +
                       " (written by a newer seqpointd)");
  }
  if (blob.size() < kHeaderBytes || std::memcmp(blob.data(), kMagic, sizeof kMagic) != 0) {
    return InvalidArgument(what + ": not an iteration-log chunk (damaged)");
  }
  const uint64_t version = GetLe(blob.data() + 4, 4);
  if (version < 1 || version > kCodecVersion) {
    return Unsupported(what + ": iteration-log codec version " + std::to_string(version) +
                       ", this seqpointd reads 1-" + std::to_string(kCodecVersion));
  }
  // Version 1 (schema v6) has no flags: every iteration was fed as measurable then.
  const size_t entry_bytes = version == 1 ? kEntryBytesV1 : kEntryBytes;
  if (blob.size() != kHeaderBytes + n * entry_bytes) {
    return InvalidArgument(what + ": " + std::to_string(blob.size()) + " bytes for " +
                           std::to_string(n) + " entries (damaged or truncated)");
  }
  out->reserve(out->size() + n);
  for (size_t i = 0; i < n; ++i) {
    const char* p = blob.data() + kHeaderBytes + i * entry_bytes;
    IterationLogEntry e;
    e.pid = static_cast<int32_t>(static_cast<uint32_t>(GetLe(p, 4)));
    e.seq_len = static_cast<uint32_t>(GetLe(p + 4, 4));
    e.iter = GetLe(p + 8, 8);
    e.batch = static_cast<uint32_t>(GetLe(p + 16, 4));
    e.repeat = static_cast<uint32_t>(GetLe(p + 20, 4));
    e.tokens = std::bit_cast<double>(GetLe(p + 24, 8));
    e.time_ns = std::bit_cast<double>(GetLe(p + 32, 8));
    e.flags = version == 1 ? 0 : static_cast<uint32_t>(GetLe(p + 40, 4));
    out->push_back(e);
  }
  return Status::Ok();
}

}  // namespace seqpoint::daemon
