// The upload spool, the per-SL-bin cost history and the persistent counters of Store.
//
// Spool policy (bounded, stated in the README and /metrics): batches are kept oldest-first up to
// upload.spool_max_bytes; a push that would exceed the bound first drops the oldest batches and
// adds them to the counter `spool_dropped_batches` (exported as
// seqpoint_upload_dropped_batches_total). A batch leaves the spool only when the endpoint
// answered 2xx, or a 4xx other than 429 (the endpoint will never accept it; counted as dropped).
#include <bit>
#include <chrono>

#include "agent/store/store.h"
#include "common/clock.h"

namespace seqpoint::daemon {

std::pair<uint32_t, uint32_t> HistoryBin(uint32_t seq_len) {
  if (seq_len < 16) return {seq_len, seq_len};
  // Keep the top 4 bits: 8 bins per octave (m * 2^k, m in [8, 16)).
  int shift = std::bit_width(seq_len) - 4;
  uint32_t lo = (seq_len >> shift) << shift;
  return {lo, lo + (1u << shift) - 1};
}

Result<std::vector<BinCostRow>> Store::QueryBinCost(uint32_t seq_len, const std::string& metric,
                                                    int64_t since_day) {
  auto [lo, hi] = HistoryBin(seq_len);
  auto s = db_->Prepare(
      "SELECT day, bin_lo, bin_hi, metric, n, sum, sumsq FROM bin_cost "
      "WHERE bin_lo=? AND metric=? AND day>=? ORDER BY day");
  if (!s.ok()) return s.status();
  (*s)->Bind(1, int64_t(lo)).Bind(2, metric).Bind(3, since_day);
  std::vector<BinCostRow> out;
  while (true) {
    auto more = (*s)->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    out.push_back({(*s)->Int(0), static_cast<uint32_t>((*s)->Int(1)),
                   static_cast<uint32_t>((*s)->Int(2)), (*s)->Text(3),
                   static_cast<uint64_t>((*s)->Int(4)), (*s)->Double(5), (*s)->Double(6)});
  }
  (void)hi;
  return out;
}

Status Store::PruneHistory(int64_t before_day) {
  return db_->Exec("DELETE FROM bin_cost WHERE day < " + std::to_string(before_day));
}

Result<int64_t> Store::PruneClosedRuns(int64_t keep) {
  // Every table of a run references runs(id) ON DELETE CASCADE (foreign keys are on).
  auto del = db_->Prepare(
      "DELETE FROM runs WHERE state != 'active' AND id NOT IN "
      "(SELECT id FROM runs WHERE state != 'active' ORDER BY id DESC LIMIT ?)");
  if (!del.ok()) return del.status();
  (*del)->Bind(1, keep);
  SEQPOINT_RETURN_IF_ERROR((*del)->Run());
  return db_->Changes();
}

Result<int64_t> Store::SpoolPush(const std::string& payload, int64_t samples, int64_t max_bytes) {
  SqliteTransaction tx(*db_);
  SEQPOINT_RETURN_IF_ERROR(tx.Begin());
  auto total = db_->Prepare("SELECT COALESCE(SUM(bytes), 0) FROM spool");
  if (!total.ok()) return total.status();
  auto row = (*total)->Step();
  if (!row.ok()) return row.status();
  int64_t bytes = (*total)->Int(0);
  (*total)->Reset();
  int64_t dropped = 0;
  auto oldest = db_->Prepare("SELECT id, bytes FROM spool ORDER BY id LIMIT 1");
  if (!oldest.ok()) return oldest.status();
  while (bytes + static_cast<int64_t>(payload.size()) > max_bytes) {
    auto more = (*oldest)->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    int64_t id = (*oldest)->Int(0);
    bytes -= (*oldest)->Int(1);
    (*oldest)->Reset();
    SEQPOINT_RETURN_IF_ERROR(db_->Exec("DELETE FROM spool WHERE id=" + std::to_string(id)));
    ++dropped;
  }
  auto ins = db_->Prepare(
      "INSERT INTO spool(created_ns, samples, bytes, payload) "
      "VALUES(?, ?, ?, ?)");
  if (!ins.ok()) return ins.status();
  int64_t now = WallNs();
  (*ins)->Bind(1, now).Bind(2, samples).Bind(3, int64_t(payload.size()));
  (*ins)->BindBlob(4, payload.data(), payload.size());
  SEQPOINT_RETURN_IF_ERROR((*ins)->Run());
  if (dropped > 0) SEQPOINT_RETURN_IF_ERROR(AddCounter("spool_dropped_batches", dropped));
  SEQPOINT_RETURN_IF_ERROR(tx.Commit());
  return dropped;
}

Result<std::optional<SpoolBatch>> Store::SpoolOldest() {
  auto s = db_->Prepare(
      "SELECT id, created_ns, samples, attempts, payload FROM spool "
      "ORDER BY id LIMIT 1");
  if (!s.ok()) return s.status();
  auto row = (*s)->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<SpoolBatch>();
  return std::optional<SpoolBatch>(
      SpoolBatch{(*s)->Int(0), (*s)->Int(1), (*s)->Int(2), (*s)->Int(3), (*s)->Blob(4)});
}

Status Store::SpoolDelete(int64_t id) {
  return db_->Exec("DELETE FROM spool WHERE id=" + std::to_string(id));
}

Status Store::SpoolCountAttempt(int64_t id) {
  return db_->Exec("UPDATE spool SET attempts = attempts + 1 WHERE id=" + std::to_string(id));
}

Result<SpoolStats> Store::SpoolStatus() {
  auto s = db_->Prepare(
      "SELECT COUNT(*), COALESCE(SUM(bytes), 0), COALESCE(SUM(samples), 0) "
      "FROM spool");
  if (!s.ok()) return s.status();
  auto row = (*s)->Step();
  if (!row.ok()) return row.status();
  return SpoolStats{(*s)->Int(0), (*s)->Int(1), (*s)->Int(2)};
}

Result<int64_t> Store::GetCounter(const std::string& name) {
  auto s = db_->Prepare("SELECT value FROM meta WHERE name=?");
  if (!s.ok()) return s.status();
  (*s)->Bind(1, name);
  auto row = (*s)->Step();
  if (!row.ok()) return row.status();
  return *row ? (*s)->Int(0) : int64_t{0};
}

Status Store::AddCounter(const std::string& name, int64_t delta) {
  auto s = db_->Prepare(
      "INSERT INTO meta VALUES(?, ?) ON CONFLICT(name) DO UPDATE SET "
      "value = value + excluded.value");
  if (!s.ok()) return s.status();
  (*s)->Bind(1, name).Bind(2, delta);
  return (*s)->Run();
}

}  // namespace seqpoint::daemon
