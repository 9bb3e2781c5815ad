// Schema, migration and reading the run tables. A flush's writes are in store_save.cpp, the spool
// and the cost history in store_spool.cpp.
#include "agent/store/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "agent/store/iteration_log_codec.h"
#include "common/clock.h"

namespace seqpoint::daemon {
namespace {

constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL,
  state TEXT NOT NULL,
  end_reason TEXT NOT NULL DEFAULT '',
  started_ns INTEGER NOT NULL,
  updated_ns INTEGER NOT NULL,
  ended_ns INTEGER NOT NULL DEFAULT 0,
  pids TEXT NOT NULL DEFAULT '',
  iterations INTEGER NOT NULL DEFAULT 0,
  max_iter INTEGER NOT NULL DEFAULT 0,
  unobserved INTEGER NOT NULL DEFAULT 0);
CREATE INDEX runs_by_key ON runs(key);
CREATE TABLE histogram(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq_len INTEGER NOT NULL, count INTEGER NOT NULL, time_ns_sum REAL NOT NULL,
  PRIMARY KEY(run_id, seq_len)) WITHOUT ROWID;
CREATE TABLE seqpoints(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  iter INTEGER NOT NULL, iters TEXT NOT NULL, pids TEXT NOT NULL, seq_len INTEGER NOT NULL, weight REAL NOT NULL,
  bin_lo INTEGER NOT NULL, bin_hi INTEGER NOT NULL);
CREATE INDEX seqpoints_by_run ON seqpoints(run_id);
CREATE TABLE measurements(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL, pid INTEGER NOT NULL, iter INTEGER NOT NULL,
  seq_len INTEGER NOT NULL, batch INTEGER NOT NULL, metric TEXT NOT NULL, unit TEXT NOT NULL,
  value REAL NOT NULL,
  PRIMARY KEY(run_id, ordinal, metric)) WITHOUT ROWID;
CREATE TABLE iteration_log(
  chunk INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  entries INTEGER NOT NULL, data BLOB NOT NULL);
CREATE INDEX iteration_log_by_run ON iteration_log(run_id, chunk);
CREATE TABLE projections(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  metric TEXT NOT NULL, unit TEXT NOT NULL, total REAL NOT NULL, low REAL NOT NULL,
  high REAL NOT NULL, actual REAL, measured INTEGER NOT NULL, updated_ns INTEGER NOT NULL,
  PRIMARY KEY(run_id, metric)) WITHOUT ROWID;
CREATE TABLE bin_cost(
  day INTEGER NOT NULL, bin_lo INTEGER NOT NULL, bin_hi INTEGER NOT NULL, metric TEXT NOT NULL,
  n INTEGER NOT NULL, sum REAL NOT NULL, sumsq REAL NOT NULL,
  PRIMARY KEY(bin_lo, metric, day)) WITHOUT ROWID;
CREATE TABLE spool(
  id INTEGER PRIMARY KEY AUTOINCREMENT, created_ns INTEGER NOT NULL, samples INTEGER NOT NULL,
  bytes INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, payload BLOB NOT NULL);
CREATE TABLE meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
)sql";

// v2: energy on every iteration (per-SL sums) and the observer-effect mark on projections.
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE histogram ADD COLUMN energy_uj_sum REAL NOT NULL DEFAULT 0;
ALTER TABLE histogram ADD COLUMN energy_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE projections ADD COLUMN perturbed INTEGER NOT NULL DEFAULT 0;
)sql";

// v3: online projections by time strata: the steady-state total (after the warm-up) and whether
// the samples bound the metric at all.
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE projections ADD COLUMN steady_total REAL;
ALTER TABLE projections ADD COLUMN steady_low REAL;
ALTER TABLE projections ADD COLUMN steady_high REAL;
ALTER TABLE projections ADD COLUMN bounded INTEGER NOT NULL DEFAULT 1;
)sql";

// v4: the part of each whole-run total that stands for iterations never observed (the gap).
constexpr const char* kSchemaV4 = R"sql(
ALTER TABLE projections ADD COLUMN gap_total REAL NOT NULL DEFAULT 0;
ALTER TABLE projections ADD COLUMN gap_low REAL NOT NULL DEFAULT 0;
ALTER TABLE projections ADD COLUMN gap_high REAL NOT NULL DEFAULT 0;
)sql";

// v5: a checkpoint of each active run's selector, so its iteration log stays short.
constexpr const char* kSchemaV5 = R"sql(
CREATE TABLE run_checkpoint(
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  iterations INTEGER NOT NULL, updated_ns INTEGER NOT NULL, data BLOB NOT NULL);
)sql";

// v6: each iteration-log chunk says its format (iteration_log_codec.h): the chunks before are
// format 0, memcpy'd structs; this build writes format 1. A v5 daemon would misread format 1,
// so the file is stamped compatible from v6 on only. Also the timed iterations of each
// histogram bin (0 on older rows: not known) and the part of a run's unobserved iterations that
// ran before the probes attached.
constexpr const char* kSchemaV6 = R"sql(
ALTER TABLE iteration_log ADD COLUMN format INTEGER NOT NULL DEFAULT 0;
ALTER TABLE histogram ADD COLUMN time_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN unobserved_before_attach INTEGER NOT NULL DEFAULT 0;
)sql";

// v7: gauges (power, memory, clocks, utilisation) are projected as a time-weighted mean, not a
// sum: each projection says its kind, a gauge its peak and its reading per SL bin. A v6 daemon
// would read a gauge's mean as a whole-run total, so the file is stamped compatible from v7 on.
constexpr const char* kSchemaV7 = R"sql(
ALTER TABLE projections ADD COLUMN kind INTEGER NOT NULL DEFAULT 0;
ALTER TABLE projections ADD COLUMN peak REAL;
CREATE TABLE gauge_bins(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  metric TEXT NOT NULL, bin_lo INTEGER NOT NULL, bin_hi INTEGER NOT NULL, mean REAL NOT NULL,
  peak REAL, peak_seq_len INTEGER NOT NULL DEFAULT 0, samples INTEGER NOT NULL,
  PRIMARY KEY(run_id, metric, bin_lo)) WITHOUT ROWID;
)sql";

// v8: a projection the agent cannot stand behind is kept with the reason it is left out (a
// missed self-check); a v7 daemon would print its value, so the file is stamped compatible from
// v8 on.
constexpr const char* kSchemaV8 = R"sql(
ALTER TABLE projections ADD COLUMN left_out TEXT NOT NULL DEFAULT '';
ALTER TABLE projections ADD COLUMN left_out_detail TEXT NOT NULL DEFAULT '';
)sql";

// v9: each measured value names the device it came from (a GPU's UUID, ...: Measurement::device);
// NULL on older rows (not recorded). A v8 daemon inserts measurements without a column list,
// which the added column breaks, so the file is stamped compatible from v9 on.
constexpr const char* kSchemaV9 = R"sql(
ALTER TABLE measurements ADD COLUMN device TEXT;
)sql";

template <typename T>
std::vector<T> SplitInts(const std::string& text) {
  std::vector<T> out;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    T v{};
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc()) break;
    out.push_back(v);
    p = next < end ? next + 1 : end;
  }
  return out;
}

RunRecord ReadRunRow(const SqliteStatement& s) {
  RunRecord r;
  r.id = s.Int(0);
  r.key = s.Text(1);
  r.state = ParseRunState(s.Text(2));
  r.end_reason = s.Text(3);
  r.started_unix_ns = s.Int(4);
  r.updated_unix_ns = s.Int(5);
  r.ended_unix_ns = s.Int(6);
  r.pids = SplitInts<int32_t>(s.Text(7));
  r.iterations = static_cast<uint64_t>(s.Int(8));
  r.max_iter = static_cast<uint64_t>(s.Int(9));
  r.unobserved = static_cast<uint64_t>(s.Int(10));
  r.unobserved_before_attach = static_cast<uint64_t>(s.Int(11));
  return r;
}

constexpr const char* kRunColumns =
    "id, key, state, end_reason, started_ns, updated_ns, ended_ns, pids, iterations, max_iter, "
    "unobserved, unobserved_before_attach";

}  // namespace

std::string_view RunStateName(RunState s) {
  switch (s) {
    case RunState::kActive:
      return "active";
    case RunState::kFinished:
      return "finished";
    case RunState::kCrashed:
      return "crashed";
    case RunState::kSetAside:
      return "set_aside";
  }
  return "finished";
}

RunState ParseRunState(std::string_view s) {
  if (s == "active") return RunState::kActive;
  if (s == "crashed") return RunState::kCrashed;
  if (s == "set_aside") return RunState::kSetAside;
  return RunState::kFinished;
}

std::string StoreRecovery::Describe() const {
  if (newer_schema) {
    return "state database '" + path + "' " + reason + "; moved it aside to '" + moved_to +
           "' (with its -wal and -shm, if any) and started on a fresh database: its runs, "
           "history and upload spool are not in the new one (to go back to the newer "
           "seqpointd, stop this one and move the file back)";
  }
  std::string out = "state database '" + path + "' was damaged (" + reason +
                    "); moved it aside to '" + moved_to +
                    "' (with its -wal and -shm, if any) and started on a fresh database: the "
                    "runs, their SeqPoints, measurements and projections, the per-SL cost "
                    "history and any batches not yet uploaded that it held are not in the new "
                    "one, and no active run resumes";
  if (bytes > 0) out += " (salvage what is left with `sqlite3 " + moved_to + " .recover`)";
  return out;
}

namespace {

// Renames path and its -wal/-shm to <path>.<why>-<unix>[.<n>] (+ -wal/-shm), why "corrupt" or
// "newer"; returns the new name of the main file.
Result<std::string> MoveAside(const std::string& path, const std::string& why = "corrupt") {
  int64_t now = WallNs() / 1'000'000'000;
  std::string target = path + "." + why + "-" + std::to_string(now);
  for (int n = 1; access(target.c_str(), F_OK) == 0; ++n) {
    target = path + "." + why + "-" + std::to_string(now) + "." + std::to_string(n);
  }
  // The -wal and -shm first: were the main file moved and these left, SQLite would replay the
  // old WAL into the fresh database.
  for (const char* suffix : {"-wal", "-shm"}) {
    std::string from = path + suffix;
    if (rename(from.c_str(), (target + suffix).c_str()) != 0 && errno != ENOENT) {
      return IoError("cannot move damaged '" + from + "' aside: " + std::strerror(errno) +
                     " (move or remove it by hand)");
    }
  }
  if (rename(path.c_str(), target.c_str()) != 0) {
    return IoError("cannot move damaged state database '" + path +
                   "' aside: " + std::strerror(errno) + " (move or remove it by hand)");
  }
  return target;
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, StoreOptions options) {
  std::unique_ptr<StateDirLock> lock;
  if (options.lock_dir) {
    size_t slash = path.rfind('/');
    auto locked = StateDirLock::Acquire(slash == std::string::npos ? "."
                                        : slash == 0               ? "/"
                                                                   : path.substr(0, slash));
    if (!locked.ok()) return locked.status();
    lock = std::move(*locked);
  }
  auto check = CheckSqliteFile(path, options.check_limit);
  if (!check.ok()) return check.status();
  std::optional<StoreRecovery> recovery;
  using Verdict = SqliteFileCheck::Verdict;
  Verdict verdict = check->verdict;
  if (verdict == Verdict::kEmpty || verdict == Verdict::kDamaged) {
    auto moved = MoveAside(path);
    if (!moved.ok()) return moved.status();
    recovery = StoreRecovery{path, *moved, check->detail, check->bytes};
    verdict = Verdict::kAbsent;
  }
  if (verdict == Verdict::kAbsent) {
    // SQLite would create it 0644 under the usual umask 022: the state is the agent's alone.
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, options.create_mode);
    if (fd >= 0) {
      fchmod(fd, options.create_mode);  // whatever the umask
      close(fd);
    } else if (errno != EEXIST) {
      return IoError("cannot create state database '" + path + "': " + std::strerror(errno) +
                     " (check that its directory exists and is writable, or set "
                     "daemon.state_dir)");
    }
  }
  auto db = SqliteDb::Open(path);
  if (!db.ok()) return db.status();
  std::unique_ptr<Store> store(new Store(std::move(*db)));
  Status migrated = store->Migrate();
  if (migrated.code() == ErrorCode::kUnsupported && !recovery) {
    // A newer seqpointd's file this one may not use (a downgrade): set aside, never misread,
    // and never a daemon that cannot start.
    store.reset();
    auto moved = MoveAside(path, "newer");
    if (!moved.ok()) return moved.status();
    recovery = StoreRecovery{path, *moved, migrated.message(), 0, true};
    db = SqliteDb::Open(path);
    if (!db.ok()) return db.status();
    store.reset(new Store(std::move(*db)));
    migrated = store->Migrate();
  }
  SEQPOINT_RETURN_IF_ERROR(migrated);
  store->lock_ = std::move(lock);
  store->recovery_ = std::move(recovery);
  if (check->verdict == Verdict::kUnchecked) store->check_skipped_ = check->detail;
  return store;
}

Status Store::Migrate() {
  auto q = db_->Prepare("PRAGMA user_version");
  if (!q.ok()) return q.status();
  auto row = (*q)->Step();
  if (!row.ok()) return row.status();
  int64_t version = (*q)->Int(0);
  (*q)->Reset();
  if (version == kStoreSchemaVersion) return Status::Ok();
  if (version > kStoreSchemaVersion) {
    auto oldest = GetCounter("oldest_compatible_schema");
    if (oldest.ok() && *oldest > 0 && *oldest <= kStoreSchemaVersion) return Status::Ok();
    return Unsupported("was written by a newer seqpointd (schema version " +
                       std::to_string(version) + ", usable by seqpointd of schema " +
                       (oldest.ok() && *oldest > 0 ? std::to_string(*oldest) : "?") +
                       " and later; this one is " + std::to_string(kStoreSchemaVersion) + ")");
  }
  SqliteTransaction tx(*db_);
  SEQPOINT_RETURN_IF_ERROR(tx.Begin());
  if (version < 1) SEQPOINT_RETURN_IF_ERROR(db_->Exec(kSchemaV1));
  if (version < 2) SEQPOINT_RETURN_IF_ERROR(db_->Exec(kSchemaV2));
  if (version < 3) SEQPOINT_RETURN_IF_ERROR(db_->Exec(kSchemaV3));
  if (version < 4) SEQPOINT_RETURN_IF_ERROR(db_->Exec(kSchemaV4));
  if (version < 5) SEQPOINT_RETURN_IF_ERROR(db_->Exec(kSchemaV5));
  if (version < 6) SEQPOINT_RETURN_IF_ERROR(db_->Exec(kSchemaV6));
  if (version < 7) SEQPOINT_RETURN_IF_ERROR(db_->Exec(kSchemaV7));
  if (version < 8) SEQPOINT_RETURN_IF_ERROR(db_->Exec(kSchemaV8));
  if (version < 9) SEQPOINT_RETURN_IF_ERROR(db_->Exec(kSchemaV9));
  SEQPOINT_RETURN_IF_ERROR(
      db_->Exec("INSERT OR REPLACE INTO meta VALUES('oldest_compatible_schema', " +
                std::to_string(kStoreOldestCompatibleSchema) + ")"));
  SEQPOINT_RETURN_IF_ERROR(
      db_->Exec("PRAGMA user_version = " + std::to_string(kStoreSchemaVersion)));
  return tx.Commit();
}

Status Store::SetAsideRun(int64_t id, const std::string& reason) {
  SqliteTransaction tx(*db_);
  Status st = tx.Begin();
  if (st.ok()) {
    auto s = db_->Prepare(
        "UPDATE runs SET state='set_aside', end_reason=?, ended_ns=?, updated_ns=? WHERE id=?");
    st = s.ok() ? Status::Ok() : s.status();
    if (st.ok()) {
      const int64_t now = WallNs();
      (*s)->Bind(1, reason).Bind(2, now).Bind(3, now).Bind(4, id);
      st = (*s)->Run();
    }
  }
  const std::string where = " WHERE run_id=" + std::to_string(id);
  if (st.ok()) st = db_->Exec("DELETE FROM iteration_log" + where);
  if (st.ok()) st = db_->Exec("DELETE FROM run_checkpoint" + where);
  if (st.ok()) st = tx.Commit();
  written_.erase(id);  // closed: never saved again
  return Track(st);
}

Result<std::vector<RunRecord>> Store::ListRuns(bool active_only, int64_t limit) {
  std::string sql = std::string("SELECT ") + kRunColumns + " FROM runs" +
                    (active_only ? " WHERE state='active'" : "") + " ORDER BY id DESC LIMIT ?";
  auto s = db_->Prepare(sql);
  if (!s.ok()) return s.status();
  (*s)->Bind(1, limit);
  std::vector<RunRecord> out;
  for (;;) {
    auto row = (*s)->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    out.push_back(ReadRunRow(**s));
  }
  return out;
}

Result<RunSnapshot> Store::LoadRun(int64_t id) {
  RunSnapshot snap;
  auto s = db_->Prepare(std::string("SELECT ") + kRunColumns + " FROM runs WHERE id=?");
  if (!s.ok()) return s.status();
  (*s)->Bind(1, id);
  auto row = (*s)->Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound("no run with id " + std::to_string(id) + " (see `seqpoint runs`)");
  snap.run = ReadRunRow(**s);

  auto h = db_->Prepare(
      "SELECT seq_len, count, time_ns_sum, energy_uj_sum, energy_count, time_count FROM "
      "histogram WHERE run_id=? ORDER BY seq_len");
  if (!h.ok()) return h.status();
  (*h)->Bind(1, id);
  while (true) {
    auto more = (*h)->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    snap.histogram.push_back({static_cast<uint32_t>((*h)->Int(0)),
                              static_cast<uint64_t>((*h)->Int(1)), (*h)->Double(2), (*h)->Double(3),
                              static_cast<uint64_t>((*h)->Int(4)),
                              static_cast<uint64_t>((*h)->Int(5))});
  }
  auto p = db_->Prepare(
      "SELECT iter, iters, pids, seq_len, weight, bin_lo, bin_hi FROM seqpoints "
      "WHERE run_id=? ORDER BY bin_lo, iter");
  if (!p.ok()) return p.status();
  (*p)->Bind(1, id);
  while (true) {
    auto more = (*p)->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    SeqPointRecord sp;
    sp.iter = static_cast<uint64_t>((*p)->Int(0));
    sp.iters = SplitInts<uint64_t>((*p)->Text(1));
    sp.pids = SplitInts<int32_t>((*p)->Text(2));
    sp.seq_len = static_cast<uint32_t>((*p)->Int(3));
    sp.weight = (*p)->Double(4);
    sp.bin_lo = static_cast<uint32_t>((*p)->Int(5));
    sp.bin_hi = static_cast<uint32_t>((*p)->Int(6));
    snap.seqpoints.push_back(std::move(sp));
  }
  auto j = db_->Prepare(
      "SELECT metric, unit, total, low, high, actual, measured, perturbed, steady_total, "
      "steady_low, steady_high, bounded, gap_total, gap_low, gap_high, kind, peak, left_out, "
      "left_out_detail FROM projections WHERE run_id=? ORDER BY metric");
  if (!j.ok()) return j.status();
  (*j)->Bind(1, id);
  while (true) {
    auto more = (*j)->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    Projection p;
    p.metric = (*j)->Text(0);
    p.unit = (*j)->Text(1);
    p.total = (*j)->Double(2);
    p.low = (*j)->Double(3);
    p.high = (*j)->Double(4);
    p.actual = (*j)->Double(5);
    p.measured = static_cast<uint64_t>((*j)->Int(6));
    p.perturbed = (*j)->Int(7) != 0;
    p.steady_total = (*j)->Double(8);
    p.steady_low = (*j)->Double(9);
    p.steady_high = (*j)->Double(10);
    p.bounded = (*j)->Int(11) != 0;
    p.gap_total = (*j)->Double(12);
    p.gap_low = (*j)->Double(13);
    p.gap_high = (*j)->Double(14);
    p.kind = static_cast<uint8_t>((*j)->Int(15));
    p.peak = (*j)->Double(16);
    p.left_out = (*j)->Text(17);
    p.left_out_detail = (*j)->Text(18);
    snap.projections.push_back(std::move(p));
  }
  SEQPOINT_RETURN_IF_ERROR(LoadGaugeBins(id, snap.projections));
  return snap;
}

Status Store::LoadGaugeBins(int64_t run_id, std::vector<Projection>& projections) {
  auto g = db_->Prepare(
      "SELECT metric, bin_lo, bin_hi, mean, peak, peak_seq_len, samples FROM gauge_bins "
      "WHERE run_id=? ORDER BY metric, bin_lo");
  if (!g.ok()) return g.status();
  (*g)->Bind(1, run_id);
  while (true) {
    auto more = (*g)->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    const std::string metric = (*g)->Text(0);
    auto p = std::find_if(projections.begin(), projections.end(),
                          [&metric](const Projection& q) { return q.metric == metric; });
    if (p == projections.end()) continue;  // its projection row is the one that counts
    GaugeBin b;
    b.bin_lo = static_cast<uint32_t>((*g)->Int(1));
    b.bin_hi = static_cast<uint32_t>((*g)->Int(2));
    b.mean = (*g)->Double(3);
    b.peak = (*g)->Double(4);
    b.peak_seq_len = static_cast<uint32_t>((*g)->Int(5));
    b.samples = static_cast<uint64_t>((*g)->Int(6));
    p->bins.push_back(b);
  }
  return Status::Ok();
}

Result<std::vector<Measurement>> Store::LoadMeasurements(int64_t run_id) {
  auto s = db_->Prepare(
      "SELECT ordinal, pid, iter, seq_len, batch, metric, unit, value, device "
      "FROM measurements WHERE run_id=? ORDER BY ordinal, metric");
  if (!s.ok()) return s.status();
  (*s)->Bind(1, run_id);
  std::vector<Measurement> out;
  while (true) {
    auto more = (*s)->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    Measurement m;
    m.ordinal = static_cast<uint64_t>((*s)->Int(0));
    m.pid = static_cast<int32_t>((*s)->Int(1));
    m.iter = static_cast<uint64_t>((*s)->Int(2));
    m.seq_len = static_cast<uint32_t>((*s)->Int(3));
    m.batch = static_cast<uint32_t>((*s)->Int(4));
    m.metric = (*s)->Text(5);
    m.unit = (*s)->Text(6);
    m.value = (*s)->Double(7);
    m.device_recorded = !(*s)->IsNull(8);
    if (m.device_recorded) m.device = (*s)->Text(8);
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::vector<IterationLogEntry>> Store::LoadIterationLog(int64_t run_id) {
  auto s = db_->Prepare(
      "SELECT data, entries, format, chunk FROM iteration_log WHERE run_id=? ORDER BY chunk");
  if (!s.ok()) return s.status();
  (*s)->Bind(1, run_id);
  std::vector<IterationLogEntry> out;
  while (true) {
    auto more = (*s)->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    const std::string what =
        "run " + std::to_string(run_id) + " iteration-log chunk " + std::to_string((*s)->Int(3));
    SEQPOINT_RETURN_IF_ERROR(DecodeIterationLog(static_cast<int>((*s)->Int(2)), (*s)->Blob(0),
                                                (*s)->Int(1), what, &out));
  }
  return out;
}

Result<std::optional<int64_t>> Store::FindRun(const std::string& id_or_key) {
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(id_or_key.data(), id_or_key.data() + id_or_key.size(), id);
  auto s = db_->Prepare(
      "SELECT id FROM runs WHERE id=? OR key=? ORDER BY (id=?) DESC, id DESC "
      "LIMIT 1");
  if (!s.ok()) return s.status();
  bool numeric = ec == std::errc() && ptr == id_or_key.data() + id_or_key.size();
  (*s)->Bind(1, numeric ? id : int64_t{-1}).Bind(2, id_or_key).Bind(3, numeric ? id : int64_t{-1});
  auto row = (*s)->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<int64_t>();
  return std::optional<int64_t>((*s)->Int(0));
}

}  // namespace seqpoint::daemon
