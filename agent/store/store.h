// seqpointd's state (docs/architecture.md): one SQLite file, <state_dir>/state.db, holding
// runs, SL histograms, SeqPoints, measurements, projections, the per-SL-bin cost history and the
// upload spool. The schema is versioned with PRAGMA user_version; a file from a newer daemon is
// refused rather than misread. WAL mode: `sqlite3 state.db` may read it while the daemon runs.
//
// Restart resumes: every active run, with its histogram, SeqPoints and measurements, is read back
// by LoadRun(). Writes are batched by the caller (one transaction per flush), so a SIGKILL loses
// at most one flush interval (daemon.flush_interval_ms: the durability window, docs/config.md)
// of iterations, never a consistent state.
//
// Bounded (docs/bounds.md): an active run's iteration log is replaced by a checkpoint of its
// selector every so many entries (SaveRun's checkpoint), and a closed run's log and checkpoint
// are dropped (a closed run never resumes).
//
// Writes that fail (a read-only file, a full disk) are tracked in write_health(): the daemon
// reports itself unhealthy, keeps its runs in memory and retries (RetryWritable reopens a
// connection that SQLite opened read-only).
//
// A flush writes only the rows that changed since the last committed one (store_save.cpp): the
// store keeps a digest of each active run's histogram, SeqPoint and projection rows as committed
// (written_rows.h), and its write statements prepared once per connection.
//
// Threads: used from the io_context thread only.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/store/run_model.h"
#include "agent/store/sqlite_db.h"
#include "agent/store/state_lock.h"
#include "agent/store/written_rows.h"
#include "common/status.h"

namespace seqpoint::daemon {

inline constexpr int kStoreSchemaVersion = 9;  // 2: energy sums, perturbed; 3: steady state,
                                               // bounded; 4: the unobserved gap;
                                               // 5: selector checkpoints; 6: iteration-log
                                               // chunk format (iteration_log_codec.h);
                                               // 7: gauges (kind, peak, gauge_bins);
                                               // 8: projections left out (left_out);
                                               // 9: each measurement's device
// Downgrades (docs/failure-modes.md): a database stamps, in meta 'oldest_compatible_schema',
// the oldest schema version whose daemon may use it as it is (a later version that only adds
// what older ones ignore keeps the stamp). A daemon opens a newer file whose stamp it meets;
// any other newer file is moved aside (as a damaged one is) and it starts on a fresh database,
// never misreading one and never refusing to start.
inline constexpr int kStoreOldestCompatibleSchema = 9;

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

// A damaged state database found at open and moved aside (Store::Open).
struct StoreRecovery {
  std::string path;           // where the database was
  std::string moved_to;       // where it is now (its -wal and -shm beside it, same suffix)
  std::string reason;         // what was wrong: "empty: 0 bytes", or SQLite's words
  int64_t bytes = 0;          // its size
  bool newer_schema = false;  // not damaged: written by a newer, incompatible seqpointd
  // The warning for the log: the file moved, why, and what the fresh database lacks.
  std::string Describe() const;
};

// Whether the store's writes succeed: the daemon's health (status, /metrics) follows it.
struct StoreWriteHealth {
  bool writable = true;               // the last write succeeded (or none failed yet)
  std::string error;                  // the last failed write's error
  int64_t failures = 0;               // failed writes since the store was opened
  int64_t failing_since_unix_ns = 0;  // when the current stretch of failures began (0: none)
  uint64_t changes = 0;               // bumped at each change of `writable` (log once per change)
};

// What the flushes wrote (store_save.cpp): rows written, and rows of a flushed run left as they
// were because they had not changed.
struct StoreWriteCounts {
  uint64_t rows_written = 0;
  uint64_t rows_unchanged = 0;
};

struct StoreOptions {
  // PRAGMA quick_check at open stops after this long; the file is then used unchecked.
  std::chrono::milliseconds check_limit{10000};
  // Mode of a state.db created here (its -wal and -shm take the same): private to the agent.
  mode_t create_mode = 0600;
  // Take the state directory's lock (state_lock.h) first and hold it while the Store lives;
  // the daemon does, so a second one never checks, moves aside or writes a database in use.
  bool lock_dir = false;
};

// One run's part of a flush (SaveRuns); null pointers stand for nothing new.
struct RunSave {
  const RunSnapshot* snapshot = nullptr;  // required
  const std::vector<Measurement>* measurements = nullptr;
  const std::vector<BinCostRow>* cost_deltas = nullptr;
  const std::vector<IterationLogEntry>* new_log = nullptr;
  const std::string* checkpoint = nullptr;  // see SaveRun
};

class Store {
 public:
  // Opens, creating the file (create_mode) when absent. An existing file is checked first: a
  // 0-byte file, or one that is not a database or fails quick_check, is moved aside to
  // <path>.corrupt-<unix time> (with its -wal and -shm) and a fresh database is created in its
  // place, so a node agent never crash-loops on a damaged file; recovery() then says so. Other
  // failures (permissions, I/O, a newer schema) are errors and leave the file alone.
  static Result<std::unique_ptr<Store>> Open(const std::string& path, StoreOptions options = {});

  // Set when Open moved a damaged file aside.
  const std::optional<StoreRecovery>& recovery() const { return recovery_; }
  // Set when the check at open ran past its limit (the file was used unchecked).
  const std::string& check_skipped() const { return check_skipped_; }

  // Runs. CreateRun takes run.id when it is set (the daemon numbers its runs itself, so a run
  // exists before the store could write it), else the next free one.
  Result<int64_t> CreateRun(const RunRecord& run);
  // The id after every run in the store.
  Result<int64_t> NextRunId();
  // One transaction: the run row (created when missing), its histogram, SeqPoints and
  // projections (replacing what was stored), the new measurements and the bin-cost deltas, and
  // the iteration log. With a checkpoint (a selector image covering every iteration so far),
  // it replaces the run's log, which then holds only new_log. A run that is no longer active
  // keeps neither log nor checkpoint.
  Status SaveRun(const RunSnapshot& snapshot, const std::vector<Measurement>& new_measurements,
                 const std::vector<BinCostRow>& cost_deltas,
                 const std::vector<IterationLogEntry>& new_log = {},
                 const std::string* checkpoint = nullptr);
  // Every run of a flush in ONE transaction (each as SaveRun): all are saved or none is, so a
  // crash or a failed write anywhere in it never leaves some runs saved and others not (their
  // records would be delivered again and counted twice; tests/agent/flush_crash_test.cpp).
  Status SaveRuns(const std::vector<RunSave>& runs);
  // A run a start could not restore: state set_aside, end_reason `reason`, ended now; its log
  // and checkpoint (what could not be read) are deleted, its other rows kept.
  Status SetAsideRun(int64_t id, const std::string& reason);
  // The run's last checkpoint ("" when none): replay its iteration log on top of it.
  Result<std::string> LoadCheckpoint(int64_t run_id);
  // Iteration-log entries and checkpoint bytes stored, over every run (for /metrics and bounds).
  struct LogStats {
    int64_t entries = 0;
    int64_t checkpoint_bytes = 0;
  };
  Result<LogStats> IterationLogStats();
  Result<std::vector<RunRecord>> ListRuns(bool active_only, int64_t limit);
  Result<RunSnapshot> LoadRun(int64_t id);
  Result<std::vector<Measurement>> LoadMeasurements(int64_t run_id);
  // Every iteration-log entry of the run, in the order they were saved; an error names the
  // chunk that cannot be read (damaged, or a newer format: iteration_log_codec.h).
  Result<std::vector<IterationLogEntry>> LoadIterationLog(int64_t run_id);
  // A run by its id ("12") or, failing that, by key (the newest run with that key).
  Result<std::optional<int64_t>> FindRun(const std::string& id_or_key);

  // Cost history (efficiency over time).
  Result<std::vector<BinCostRow>> QueryBinCost(uint32_t seq_len, const std::string& metric,
                                               int64_t since_day);
  Status PruneHistory(int64_t before_day);
  // Deletes closed runs (with their rows in every table) beyond the `keep` most recent ones;
  // active runs are never touched. Returns how many were deleted.
  Result<int64_t> PruneClosedRuns(int64_t keep);

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

  // Write health (store_health.cpp). CheckWritable writes a row of `meta` and says whether
  // that worked; RetryWritable reopens the connection when SQLite opened the file read-only
  // (it never upgrades one) and checks again. Both update write_health().
  const StoreWriteHealth& write_health() const { return health_; }
  const StoreWriteCounts& write_counts() const { return counts_; }
  Status CheckWritable();
  Status RetryWritable();

  SqliteDb& db() { return *db_; }

 private:
  explicit Store(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}
  Status Migrate();
  // Records a write's outcome in health_ and returns it.
  Status Track(Status st);
  // The write statements of a flush, prepared once per connection (store_save.cpp).
  enum class Stmt {
    kRun,
    kHistogram,
    kSeqPointsDelete,
    kSeqPoint,
    kProjection,
    kMeasurement,
    kCost,
    kLogDelete,
    kCheckpointDelete,
    kCheckpoint,
    kLog,
    kGaugeBinsDelete,
    kGaugeBin,
    kCount,
  };
  Result<SqliteStatement*> Prepared(Stmt which);
  // One run's rows, inside the caller's transaction: what differs from `written` (the run's rows
  // as committed), which it updates.
  Status SaveRunRows(const RunSave& save, WrittenRows& written);
  Status SaveHistogram(const RunSnapshot& snap, WrittenRows& written);
  Status SaveSeqPoints(const RunSnapshot& snap, WrittenRows& written);
  Status SaveProjections(const RunSnapshot& snap, WrittenRows& written);
  Status SaveGaugeBins(int64_t run_id, const Projection& p);
  Status LoadGaugeBins(int64_t run_id, std::vector<Projection>& projections);
  // Runs a bound statement, counted.
  Status Write(SqliteStatement* s);
  Result<int64_t> CreateRunTx(const RunRecord& run);
  // The iteration log and checkpoint part of SaveRun (store_log.cpp), inside its transaction.
  Status SaveLog(const RunRecord& run, const std::vector<IterationLogEntry>& new_log,
                 const std::string* checkpoint);
  StoreWriteHealth health_;
  StoreWriteCounts counts_;
  std::unique_ptr<SqliteDb> db_;
  // After db_: finalized before its connection closes.
  std::array<std::unique_ptr<SqliteStatement>, static_cast<size_t>(Stmt::kCount)> prepared_;
  std::unordered_map<int64_t, WrittenRows> written_;  // active runs, as last committed
  std::unique_ptr<StateDirLock> lock_;
  std::optional<StoreRecovery> recovery_;
  std::string check_skipped_;
};

}  // namespace seqpoint::daemon
