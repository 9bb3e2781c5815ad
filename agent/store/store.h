// seqpointd's state (docs/architecture.md): one SQLite file, <state_dir>/state.db, holding
// runs, SL histograms, SeqPoints, measurements, projections, the per-SL-bin cost history and the
// upload spool. The schema is versioned with PRAGMA user_version; a file from a newer daemon is
// refused rather than misread. WAL mode: `sqlite3 state.db` may read it while the daemon runs.
//
// Restart resumes: every active run, with its histogram, SeqPoints and measurements, is read back
// by LoadRun(). Writes are batched by the caller (one transaction per flush), so a SIGKILL loses
// at most one flush interval of histogram counts, never a consistent state.
//
// Threads: used from the io_context thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/store/run_model.h"
#include "agent/store/sqlite_db.h"
#include "common/status.h"

namespace seqpoint::daemon {

inline constexpr int kStoreSchemaVersion = 3;  // 2: energy sums, perturbed; 3: steady state, bounded

// One day of one SL bin's cost on this node: n iterations, sum and sum of squares of a metric.
struct BinCostRow {
  int64_t day = 0;  // days since the Unix epoch (UTC)
  uint32_t bin_lo = 0, bin_hi = 0;
  std::string metric;
  uint64_t n = 0;
  double sum = 0, sumsq = 0;
};

// The SL bin used for the cost history: 8 bins per power of two (about 12% wide), so a bin keeps
// its meaning across runs with different SL distributions. Returns [lo, hi].
std::pair<uint32_t, uint32_t> HistoryBin(uint32_t seq_len);

struct SpoolBatch {
  int64_t id = 0;
  int64_t created_unix_ns = 0;
  int64_t samples = 0;
  int64_t attempts = 0;
  std::string payload;  // snappy-compressed remote-write request
};

struct SpoolStats {
  int64_t batches = 0;
  int64_t bytes = 0;
  int64_t samples = 0;
};

class Store {
 public:
  static Result<std::unique_ptr<Store>> Open(const std::string& path);

  // Runs.
  Result<int64_t> CreateRun(const RunRecord& run);
  // One transaction: the run row, its histogram, SeqPoints and projections (replacing what was
  // stored), the new measurements and the bin-cost deltas.
  Status SaveRun(const RunSnapshot& snapshot, const std::vector<Measurement>& new_measurements,
                 const std::vector<BinCostRow>& cost_deltas,
                 const std::vector<IterationLogEntry>& new_log = {});
  Result<std::vector<RunRecord>> ListRuns(bool active_only, int64_t limit);
  Result<RunSnapshot> LoadRun(int64_t id);
  Result<std::vector<Measurement>> LoadMeasurements(int64_t run_id);
  // Every iteration-log entry of the run, in the order they were saved.
  Result<std::vector<IterationLogEntry>> LoadIterationLog(int64_t run_id);
  // A run by its id ("12") or, failing that, by key (the newest run with that key).
  Result<std::optional<int64_t>> FindRun(const std::string& id_or_key);

  // Cost history (efficiency over time).
  Result<std::vector<BinCostRow>> QueryBinCost(uint32_t seq_len, const std::string& metric,
                                               int64_t since_day);
  Status PruneHistory(int64_t before_day);

  // Upload spool: at-least-once; a batch is deleted only once the endpoint acknowledged it.
  // Push drops the oldest batches while the spool would exceed max_bytes and returns how many.
  Result<int64_t> SpoolPush(const std::string& payload, int64_t samples, int64_t max_bytes);
  Result<std::optional<SpoolBatch>> SpoolOldest();
  Status SpoolDelete(int64_t id);
  Status SpoolCountAttempt(int64_t id);
  Result<SpoolStats> SpoolStatus();

  // Monotonic counters that must survive restarts (e.g. spool drops), in table `meta`.
  Result<int64_t> GetCounter(const std::string& name);
  Status AddCounter(const std::string& name, int64_t delta);

  SqliteDb& db() { return *db_; }

 private:
  explicit Store(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}
  Status Migrate();
  std::unique_ptr<SqliteDb> db_;
};

}  // namespace seqpoint::daemon
