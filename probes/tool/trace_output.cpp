// See trace_output.h.
#include "probes/tool/trace_output.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace seqpoint::probes {
namespace {

constexpr size_t kFirstSkippedKept = 16;

std::string SkipReason(const IterationEvent& e) {
  if (e.flags & SP_FLAG_NO_BEGIN) return "end without begin";
  if (e.flags & SP_FLAG_EXITED) return "process exited or detached inside it";
  if (e.flags & SP_FLAG_SL_ZERO) return "seq_len 0";
  if (e.flags & SP_FLAG_SL_HUGE) return "seq_len above max_seq_len";
  return "";
}

}  // namespace

TraceOutput::~TraceOutput() {
  for (auto& [pid, file] : files_) {
    if (!file.closed) Close(pid, 0);
  }
}

std::string TraceOutput::PathFor(int pid) const {
  std::string path = pattern_;
  size_t at = path.find("{pid}");
  if (at != std::string::npos) path.replace(at, 5, std::to_string(pid));
  return path;
}

void TraceOutput::SetHeader(int pid, std::vector<std::string> comments) {
  headers_[pid] = std::move(comments);
}

TraceOutput::File* TraceOutput::Open(int pid, const IterationEvent& first) {
  auto it = files_.find(pid);
  if (it != files_.end() && it->second.failed) return nullptr;
  if (it != files_.end() && !it->second.closed) return &it->second;
  std::string path = PathFor(pid);
  if (it != files_.end()) {  // an earlier image of this pid had a file
    if (path == "-") return nullptr;
    closed_.push_back(it->second.summary);
    files_.erase(it);
    path += "." + std::to_string(++generation_[pid] + 1);
  }
  TraceSchema schema;
  schema.has_iter = true;
  // Columns the source fills: the USDT provider's batch and tokens when the first iteration
  // gives them (design section 1: batch >= 1 when present; Python's default batch is 0).
  schema.has_batch = first.probe == 0 && first.batch > 0;
  schema.has_tokens = first.probe == 0 && first.tokens > 0;
  schema.metrics = {"time_ns"};
  File& file = files_[pid];
  file.summary.path = path;
  file.probe = first.probe;
  auto writer = TraceWriter::Create(file.summary.path, schema);
  if (!writer.ok()) {
    if (error_.ok()) error_ = writer.status();
    file.closed = file.failed = true;
    return nullptr;
  }
  file.writer = std::move(*writer);
  for (const std::string& line : headers_[pid]) (void)file.writer->AppendComment(line);
  return &file;
}

void TraceOutput::OnEnd(const IterationEvent& e) {
  File* file = Open(static_cast<int>(e.pid), e);
  if (file == nullptr) {
    ++dropped_;
    return;
  }
  std::string reason = SkipReason(e);
  if (reason.empty() && file->writer->schema().has_batch && e.batch == 0) {
    reason = "batch 0 in a trace whose batch column started >= 1";
  }
  if (reason.empty() && e.probe != file->probe) {
    reason = "from another source (USDT vs zero-code probe) than the file's first iteration";
  }
  if (!reason.empty()) {
    ++file->summary.skipped;
    ++file->skipped_by_reason[reason];
    if (file->first_skipped.size() < kFirstSkippedKept) file->first_skipped.push_back(e.iter);
    return;
  }
  double time_ns = e.complete() ? static_cast<double>(e.duration_ns()) : std::nan("");
  if (!e.complete()) ++file->summary.rows_without_time;
  TraceRow row;
  row.iter = e.iter;
  row.seq_len = e.seq_len;
  row.batch = e.batch;
  row.tokens = e.tokens;
  row.metrics = std::span<const double>(&time_ns, 1);
  Status s = file->writer->Append(row);
  if (!s.ok() && error_.ok()) error_ = s;
  ++file->summary.rows;
}

void TraceOutput::Close(int pid, uint64_t lost) {
  auto it = files_.find(pid);
  if (it == files_.end() || it->second.closed) return;
  File& file = it->second;
  file.closed = true;
  file.summary.lost = lost;
  Status s = file.writer->Flush();
  if (!s.ok() && error_.ok()) error_ = s;
  bool to_stdout = file.summary.path == "-";
  file.writer.reset();
  // The writer takes comments before the first row only; the format (design section 1) allows
  // '#' lines anywhere, so the summary is appended after the writer is done.
  std::FILE* f = to_stdout ? stdout : std::fopen(file.summary.path.c_str(), "a");
  if (f == nullptr) {
    if (error_.ok())
      error_ = IoError("appending to " + file.summary.path + ": " + std::strerror(errno));
    return;
  }
  std::fprintf(f,
               "# seqpoint probe: %llu rows (%llu without time_ns: abandoned), %llu "
               "iterations skipped, %llu records lost (ring buffer full)\n",
               static_cast<unsigned long long>(file.summary.rows),
               static_cast<unsigned long long>(file.summary.rows_without_time),
               static_cast<unsigned long long>(file.summary.skipped),
               static_cast<unsigned long long>(lost));
  for (const auto& [reason, n] : file.skipped_by_reason) {
    std::fprintf(f, "# skipped: %llu x %s\n", static_cast<unsigned long long>(n), reason.c_str());
  }
  if (!file.first_skipped.empty()) {
    std::string list;
    for (uint64_t iter : file.first_skipped)
      list += (list.empty() ? "" : ",") + std::to_string(iter);
    std::fprintf(f, "# skipped iterations (first %zu): %s\n", file.first_skipped.size(),
                 list.c_str());
  }
  if (to_stdout)
    std::fflush(f);
  else if (std::fclose(f) != 0 && error_.ok())
    error_ = IoError("closing " + file.summary.path);
}

void TraceOutput::CloseAll(const IterationProbeStats& stats) {
  for (auto& [pid, file] : files_) {
    auto s = stats.per_pid.find(pid);
    Close(pid, s == stats.per_pid.end() ? 0 : s->second.lost);
  }
}

std::vector<TraceFileSummary> TraceOutput::summaries() const {
  std::vector<TraceFileSummary> out = closed_;
  for (const auto& [pid, file] : files_) out.push_back(file.summary);
  return out;
}

}  // namespace seqpoint::probes
