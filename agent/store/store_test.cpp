#include "agent/store/store.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "agent/store/iteration_log_codec.h"
#include "agent/testing/test_util.h"

using namespace seqpoint::daemon;

namespace {

Projection Proj(std::string metric, std::string unit, double total, double low, double high,
                double actual, uint64_t measured, bool perturbed = false) {
  Projection p;
  p.metric = std::move(metric);
  p.unit = std::move(unit);
  p.total = total;
  p.low = low;
  p.high = high;
  p.actual = actual;
  p.measured = measured;
  p.perturbed = perturbed;
  return p;
}

RunSnapshot SampleRun(int64_t id) {
  RunSnapshot s;
  s.run.id = id;
  s.run.key = "job-7";
  s.run.pids = {100, 101};
  s.run.iterations = 30;
  s.run.max_iter = 29;
  s.run.unobserved_before_attach = 4;
  s.histogram = {{12, 10, 1.2e9, 0, 0, 9}, {40, 20, 4.0e9}};
  s.seqpoints = {{3, {3, 9}, {100, 100}, 12, 10, 1, 20}, {17, {17}, {101}, 40, 20, 21, 60}};
  s.projections = {Proj("time_ns", "ns", 5.1e9, 4.9e9, 5.3e9, 5.2e9, 3)};
  return s;
}

}  // namespace

TEST_CASE("agent store: a run round-trips and survives reopening") {
  testing::TempDir dir;
  int64_t id = 0;
  {
    auto store = Store::Open(dir.File("state.db"));
    REQUIRE_MESSAGE(store.ok(), store.status().ToString());
    RunRecord r;
    r.key = "job-7";
    auto created = (*store)->CreateRun(r);
    REQUIRE(created.ok());
    id = *created;
    std::vector<Measurement> m = {{3, 100, 3, 12, 1, "time_ns", "ns", 1.1e8},
                                  {3, 100, 3, 12, 1, "task_clock", "ns", 9e7}};
    std::vector<IterationLogEntry> log1 = {{100, 12, 0, 1, 1, 12.0}, {100, 40, 1, 1, 1, 40.0}};
    std::vector<IterationLogEntry> log2 = {{101, 7, 0, 1, 1, 7.0}};
    REQUIRE((*store)->SaveRun(SampleRun(id), m, {}, log1).ok());
    REQUIRE((*store)->SaveRun(SampleRun(id), {}, {}, log2).ok());
  }
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  auto active = (*store)->ListRuns(true, 10);
  REQUIRE(active.ok());
  REQUIRE(active->size() == 1);
  CHECK((*active)[0].pids == std::vector<int32_t>{100, 101});
  auto snap = (*store)->LoadRun(id);
  REQUIRE(snap.ok());
  CHECK(snap->histogram.size() == 2);
  CHECK(snap->histogram[0].time_count == 9);
  CHECK(snap->run.unobserved_before_attach == 4);
  CHECK(snap->seqpoints[0].iters == std::vector<uint64_t>{3, 9});
  CHECK(snap->projections[0].actual == doctest::Approx(5.2e9));
  CHECK((*store)->LoadMeasurements(id)->size() == 2);
  auto log = (*store)->LoadIterationLog(id);
  REQUIRE(log->size() == 3);
  CHECK((*log)[1].seq_len == 40);
  CHECK((*log)[2].pid == 101);
  CHECK(**(*store)->FindRun("job-7") == id);
  CHECK(**(*store)->FindRun(std::to_string(id)) == id);
  CHECK(!(*store)->FindRun("nope")->has_value());
  CHECK(!(*store)->LoadRun(id + 1).ok());
}

TEST_CASE("agent store: iteration log chunks of the old 32-byte layout still read, times as 0") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  RunRecord r;
  r.key = "old-log";
  const int64_t id = *(*store)->CreateRun(r);
  // A chunk as schema v2 wrote it (before each entry carried its time).
  std::vector<IterationLogEntryV2> old = {{100, 12, 0, 1, 1, 12.0}, {100, 40, 1, 1, 1, 40.0}};
  auto insert =
      (*store)->db().Prepare("INSERT INTO iteration_log(run_id, entries, data) VALUES(?, ?, ?)");
  REQUIRE(insert.ok());
  (*insert)->Bind(1, id).Bind(2, int64_t(old.size()));
  (*insert)->BindBlob(3, old.data(), old.size() * sizeof(IterationLogEntryV2));
  REQUIRE((*insert)->Run().ok());
  // And one in today's layout after it.
  std::vector<IterationLogEntry> now = {{101, 7, 2, 1, 1, 7.0, 3.5e6}};
  REQUIRE((*store)->SaveRun(SampleRun(id), {}, {}, now).ok());
  auto log = (*store)->LoadIterationLog(id);
  REQUIRE(log.ok());
  REQUIRE(log->size() == 3);
  CHECK((*log)[1].seq_len == 40);
  CHECK((*log)[1].time_ns == 0);
  CHECK((*log)[2].pid == 101);
  CHECK((*log)[2].time_ns == 3.5e6);
}

TEST_CASE("agent store: a newer, incompatible database is moved aside and a fresh one used") {
  // A downgrade past a format change: never misread, never a daemon that cannot start.
  testing::TempDir dir;
  {
    auto db = SqliteDb::Open(dir.File("state.db"));
    REQUIRE(db.ok());
    REQUIRE((*db)->Exec("CREATE TABLE meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL)").ok());
    REQUIRE((*db)->Exec("INSERT INTO meta VALUES('oldest_compatible_schema', 99)").ok());
    REQUIRE((*db)->Exec("PRAGMA user_version = 99").ok());
  }
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  REQUIRE((*store)->recovery().has_value());
  const StoreRecovery& r = *(*store)->recovery();
  CHECK(r.newer_schema);
  CHECK(r.Describe().find("newer seqpointd (schema version 99") != std::string::npos);
  CHECK(r.Describe().find("move the file back") != std::string::npos);
  CHECK(access(r.moved_to.c_str(), F_OK) == 0);  // kept for an upgrade back
  CHECK(*(*store)->NextRunId() == 1);
}

TEST_CASE("agent store: a newer database stamped compatible is used as it is") {
  // A later schema that only adds what this one ignores keeps oldest_compatible_schema.
  testing::TempDir dir;
  int64_t id = 0;
  {
    auto store = Store::Open(dir.File("state.db"));
    REQUIRE(store.ok());
    RunRecord r;
    r.key = "from-the-future";
    id = *(*store)->CreateRun(r);
    REQUIRE((*store)->db().Exec("CREATE TABLE future_stuff(x INTEGER)").ok());
    REQUIRE((*store)
                ->db()
                .Exec("PRAGMA user_version = " + std::to_string(kStoreSchemaVersion + 1))
                .ok());
  }
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  CHECK(!(*store)->recovery().has_value());
  CHECK((*store)->LoadRun(id)->run.key == "from-the-future");
}

TEST_CASE("agent store: an unwritable state directory is a clear error") {
  auto store = Store::Open("/nonexistent-dir/state.db");
  REQUIRE(!store.ok());
  CHECK(store.status().message().find("daemon.state_dir") != std::string::npos);
}

TEST_CASE("agent store: the spool is bounded, oldest dropped first, and counted") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  std::string batch(1000, 'x');
  for (int i = 0; i < 5; ++i) CHECK(*(*store)->SpoolPush(batch, 10, 3500) == 0 + (i >= 3));
  auto st = (*store)->SpoolStatus();
  CHECK(st->batches == 3);
  CHECK(st->bytes == 3000);
  CHECK(*(*store)->GetCounter("spool_dropped_batches") == 2);
  auto oldest = (*store)->SpoolOldest();
  REQUIRE(oldest->has_value());
  int64_t first = (*oldest)->id;
  REQUIRE((*store)->SpoolCountAttempt(first).ok());
  REQUIRE((*store)->SpoolDelete(first).ok());
  CHECK((*(*store)->SpoolOldest())->id > first);
}

TEST_CASE("agent store: SL-bin cost history accumulates per day") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  auto [lo, hi] = HistoryBin(100);
  CHECK(lo <= 100);
  CHECK(hi >= 100);
  CHECK(HistoryBin(101).first == lo);
  CHECK(HistoryBin(7).first == 7);
  RunRecord r;
  r.key = "k";
  RunSnapshot s;
  s.run.id = *(*store)->CreateRun(r);
  std::vector<BinCostRow> d1 = {{19000, lo, hi, "time_ns", 2, 20.0, 200.0}};
  std::vector<BinCostRow> d2 = {{19000, lo, hi, "time_ns", 1, 12.0, 144.0},
                                {19001, lo, hi, "time_ns", 1, 9.0, 81.0}};
  REQUIRE((*store)->SaveRun(s, {}, d1).ok());
  REQUIRE((*store)->SaveRun(s, {}, d2).ok());
  auto rows = (*store)->QueryBinCost(100, "time_ns", 0);
  REQUIRE(rows->size() == 2);
  CHECK((*rows)[0].n == 3);
  CHECK((*rows)[0].sum == doctest::Approx(32.0));
  REQUIRE((*store)->PruneHistory(19001).ok());
  CHECK((*store)->QueryBinCost(100, "time_ns", 0)->size() == 1);
}

TEST_CASE("agent store: closed runs beyond the kept number go with their rows, active ones stay") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) {
    RunSnapshot s;
    s.run.key = "run" + std::to_string(i);
    s.run.id = *(*store)->CreateRun(s.run);
    s.run.state = i == 0 ? RunState::kActive : RunState::kFinished;  // the oldest still runs
    s.histogram = {{16, 3, 3e6}};
    REQUIRE((*store)->SaveRun(s, {{0, 1, 0, 16, 1, "perf:task-clock", "ns", 1e6}}, {}).ok());
    ids.push_back(s.run.id);
  }
  auto pruned = (*store)->PruneClosedRuns(2);
  REQUIRE(pruned.ok());
  CHECK(*pruned == 3);
  auto all = (*store)->ListRuns(false, 100);
  REQUIRE(all.ok());
  std::vector<int64_t> left;
  for (const RunRecord& r : *all) left.push_back(r.id);
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<int64_t>{ids[0], ids[4], ids[5]});
  CHECK((*store)->LoadMeasurements(ids[1])->empty());  // cascaded
  CHECK((*store)->LoadMeasurements(ids[5])->size() == 1);
  CHECK(*(*store)->PruneClosedRuns(2) == 0);
}

TEST_CASE("agent store: a version 1 database gains the energy and perturbed columns, data kept") {
  testing::TempDir dir;
  int64_t id = 0;
  {
    // A v1 file: today's schema with v2's columns dropped, as seqpointd 0.1 wrote it.
    auto store = Store::Open(dir.File("state.db"));
    REQUIRE(store.ok());
    RunRecord r;
    r.key = "old";
    id = *(*store)->CreateRun(r);
    SqliteDb& db = (*store)->db();
    for (const char* sql :
         {"ALTER TABLE histogram DROP COLUMN energy_uj_sum",
          "ALTER TABLE histogram DROP COLUMN energy_count",
          "ALTER TABLE projections DROP COLUMN perturbed",
          "ALTER TABLE projections DROP COLUMN steady_total",
          "ALTER TABLE projections DROP COLUMN steady_low",
          "ALTER TABLE projections DROP COLUMN steady_high",
          "ALTER TABLE projections DROP COLUMN bounded",
          "ALTER TABLE projections DROP COLUMN gap_total",
          "ALTER TABLE projections DROP COLUMN gap_low",
          "ALTER TABLE projections DROP COLUMN gap_high", "DROP TABLE run_checkpoint",
          "ALTER TABLE iteration_log DROP COLUMN format",
          "ALTER TABLE histogram DROP COLUMN time_count",
          "ALTER TABLE runs DROP COLUMN unobserved_before_attach",
          "ALTER TABLE projections DROP COLUMN kind", "ALTER TABLE projections DROP COLUMN peak",
          "ALTER TABLE projections DROP COLUMN left_out",
          "ALTER TABLE projections DROP COLUMN left_out_detail",
          "DROP TABLE gauge_bins", "ALTER TABLE measurements DROP COLUMN device",
          "DELETE FROM meta", "PRAGMA user_version = 1"}) {
      REQUIRE_MESSAGE(db.Exec(sql).ok(), sql);
    }
    REQUIRE(
        db.Exec("INSERT INTO histogram VALUES(" + std::to_string(id) + ", 12, 10, 1.2e9)").ok());
  }
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  auto old = (*store)->LoadRun(id);
  REQUIRE(old.ok());
  REQUIRE(old->histogram.size() == 1);
  CHECK(old->histogram[0].time_ns_sum == 1.2e9);
  CHECK(old->histogram[0].energy_count == 0);
  RunSnapshot s = *old;
  s.histogram[0].energy_uj_sum = 3.5e6;
  s.histogram[0].energy_count = 7;
  s.projections = {Proj("energy_uj", "uJ", 5e6, 4e6, 6e6, 3.5e6, 2, false),
                   Proj("perf:cycles", "count", 1e9, 9e8, 1.1e9, NAN, 2, true)};
  s.projections[1].gap_total = 1e8;
  s.projections[1].gap_low = 5e7;
  s.projections[1].gap_high = INFINITY;  // a gap the samples cannot bound
  REQUIRE((*store)->SaveRun(s, {}, {}).ok());
  auto back = (*store)->LoadRun(id);
  REQUIRE(back.ok());
  CHECK(back->histogram[0].energy_uj_sum == 3.5e6);
  CHECK(back->histogram[0].energy_count == 7);
  REQUIRE(back->projections.size() == 2);
  CHECK(!back->projections[0].perturbed);
  CHECK(back->projections[1].perturbed);
  CHECK(back->projections[0].gap_total == 0);
  CHECK(back->projections[1].gap_total == 1e8);
  CHECK(back->projections[1].gap_low == 5e7);
  CHECK(std::isinf(back->projections[1].gap_high));
}

namespace {

// A closed state database holding one run and enough spool to span many pages.
void WriteStateDb(const std::string& path, int batches = 50) {
  auto store = Store::Open(path);
  REQUIRE(store.ok());
  RunRecord r;
  r.key = "job-7";
  auto id = (*store)->CreateRun(r);
  REQUIRE(id.ok());
  REQUIRE((*store)->SaveRun(SampleRun(*id), {}, {}).ok());
  for (int i = 0; i < batches; ++i) {
    REQUIRE((*store)->SpoolPush(std::string(4000, 'a' + i % 26), 1, 1 << 30).ok());
  }
}

std::vector<std::string> CorruptFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.rfind("state.db.corrupt-", 0) == 0) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("agent store: a new state.db is private (0600), whatever the umask") {
  testing::TempDir dir;
  mode_t old = umask(022);
  auto store = Store::Open(dir.File("state.db"));
  umask(old);
  REQUIRE(store.ok());
  CHECK(!(*store)->recovery());
  struct stat st {};
  REQUIRE(stat(dir.File("state.db").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(stat(dir.File("state.db-wal").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("agent store: a 0-byte state.db is moved aside, said, and a fresh one made") {
  testing::TempDir dir;
  dir.Write("state.db", "");
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  REQUIRE((*store)->recovery());
  const StoreRecovery& rec = *(*store)->recovery();
  CHECK(rec.reason == "empty: 0 bytes");
  CHECK(rec.moved_to.find(dir.File("state.db.corrupt-")) == 0);
  CHECK(CorruptFiles(dir.path()).size() == 1);
  CHECK(rec.Describe().find("moved it aside to '" + rec.moved_to + "'") != std::string::npos);
  CHECK(rec.Describe().find("started on a fresh database") != std::string::npos);
  CHECK((*store)->ListRuns(false, 10)->empty());
  RunRecord r;
  r.key = "after";
  CHECK((*store)->CreateRun(r).ok());
}

TEST_CASE("agent store: a truncated, overwritten or foreign state.db is moved aside with its WAL") {
  for (std::string damage : {"truncated", "overwritten", "garbage"}) {
    CAPTURE(damage);
    testing::TempDir dir;
    const std::string path = dir.File("state.db");
    WriteStateDb(path);
    auto size = std::filesystem::file_size(path);
    REQUIRE(size > 16 * 4096);
    if (damage == "truncated") {
      std::filesystem::resize_file(path, size / 3 + 1000);
    } else if (damage == "overwritten") {  // the pages past the first, garbage
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(4096);
      std::string junk(8 * 4096, '\x5a');
      f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    } else {
      dir.Write("state.db", std::string(10000, 'g'));
    }
    dir.Write("state.db-wal", "");  // a leftover WAL goes with it, never into the new file
    auto store = Store::Open(path);
    REQUIRE_MESSAGE(store.ok(), store.status().ToString());
    REQUIRE((*store)->recovery());
    const StoreRecovery& rec = *(*store)->recovery();
    CHECK(!rec.reason.empty());
    CHECK(std::filesystem::exists(rec.moved_to));
    CHECK(std::filesystem::exists(rec.moved_to + "-wal"));
    CHECK((*store)->ListRuns(false, 10)->empty());
    auto again = Store::Open(dir.File("other.db"));  // a healthy file is left alone
    REQUIRE(again.ok());
    CHECK(!(*again)->recovery());
  }
  testing::TempDir dir;  // and a healthy one reopens with its data, nothing moved
  WriteStateDb(dir.File("state.db"));
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  CHECK(!(*store)->recovery());
  CHECK((*store)->ListRuns(false, 10)->size() == 1);
  CHECK(CorruptFiles(dir.path()).empty());
}

TEST_CASE("agent store: the check at open is bounded in time, past it the file is used as is") {
  testing::TempDir dir;
  WriteStateDb(dir.File("state.db"), 500);  // 2 MB: many thousands of quick_check steps
  auto check = CheckSqliteFile(dir.File("state.db"), std::chrono::milliseconds(0));
  REQUIRE_MESSAGE(check.ok(), check.status().ToString());
  CHECK(check->verdict == SqliteFileCheck::Verdict::kUnchecked);
  StoreOptions options;
  options.check_limit = std::chrono::milliseconds(0);
  auto store = Store::Open(dir.File("state.db"), options);
  REQUIRE(store.ok());
  CHECK(!(*store)->recovery());
  CHECK((*store)->check_skipped().find("quick_check ran past 0 ms") == 0);
  CHECK((*store)->ListRuns(false, 10)->size() == 1);
}

TEST_CASE("agent store: one daemon per state directory, a second is told who holds it") {
  testing::TempDir dir;
  StoreOptions locked;
  locked.lock_dir = true;
  {
    auto first = Store::Open(dir.File("state.db"), locked);
    REQUIRE_MESSAGE(first.ok(), first.status().ToString());
    auto second = Store::Open(dir.File("state.db"), locked);
    REQUIRE(!second.ok());
    CHECK(second.status().code() == seqpoint::ErrorCode::kUnavailable);
    CHECK(second.status().message() ==
          "state directory '" + dir.path() + "' is in use by another seqpointd (pid " +
              std::to_string(getpid()) + ", holding " + dir.File("seqpointd.lock") +
              "); stop it, or give this one its own --state-dir (daemon.state_dir)");
    struct stat st {};
    REQUIRE(stat(dir.File("seqpointd.lock").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
  // Released with the Store (and by the kernel when a daemon dies).
  CHECK(Store::Open(dir.File("state.db"), locked).ok());
}

TEST_CASE("agent store: 4 KiB of garbage in a finished run's page is found at open, moved aside") {
  testing::TempDir dir;
  const std::string path = dir.File("state.db");
  int64_t page = 0, page_size = 4096;
  {
    auto store = Store::Open(path);
    REQUIRE(store.ok());
    RunRecord r;
    r.key = "done";
    const int64_t id = *(*store)->CreateRun(r);
    RunSnapshot s = SampleRun(id);
    for (uint32_t sl = 1; sl < 400; ++sl) s.histogram.push_back({sl + 1000, sl, 1e6 * sl});
    s.run.state = RunState::kFinished;
    REQUIRE((*store)->SaveRun(s, {}, {}).ok());
    // The page of the histogram's b-tree that holds the run's last rows.
    auto q = (*store)->db().Prepare(
        "SELECT MAX(pageno), (SELECT page_size FROM pragma_page_size) FROM dbstat "
        "WHERE name='histogram'");
    REQUIRE(q.ok());
    REQUIRE(*(*q)->Step());
    page = (*q)->Int(0);
    page_size = (*q)->Int(1);
  }
  REQUIRE(page > 1);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((page - 1) * page_size);
    std::string junk(static_cast<size_t>(page_size), '\0');
    uint32_t x = 12345;
    for (char& c : junk) c = static_cast<char>((x = x * 1103515245u + 12345u) >> 24);
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto store = Store::Open(path);
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  REQUIRE((*store)->recovery());
  CHECK(!(*store)->recovery()->reason.empty());   // SQLite's words: malformed, or quick_check rows
  CHECK((*store)->ListRuns(false, 10)->empty());  // a fresh database, never the damaged one
}

TEST_CASE("agent store: a checkpoint replaces the log, and a closed run keeps neither") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  RunSnapshot s = SampleRun(0);
  s.run.id = 5;  // numbered by the daemon: the row is created by the save
  std::vector<IterationLogEntry> log(100, {100, 12, 0, 1, 1, 12.0, 1e6});
  REQUIRE((*store)->SaveRun(s, {}, {}, log).ok());
  CHECK((*store)->LoadRun(5)->run.key == "job-7");
  CHECK((*store)->IterationLogStats()->entries == 100);
  const std::string image = "checkpoint bytes";
  std::vector<IterationLogEntry> after(3, {100, 40, 1, 1, 1, 40.0, 2e6});
  REQUIRE((*store)->SaveRun(s, {}, {}, after, &image).ok());
  CHECK((*store)->LoadIterationLog(5)->size() == 3);
  CHECK(*(*store)->LoadCheckpoint(5) == image);
  CHECK(*(*store)->NextRunId() == 6);
  s.run.state = RunState::kFinished;
  REQUIRE((*store)->SaveRun(s, {}, {}, after).ok());
  CHECK((*store)->LoadIterationLog(5)->empty());
  CHECK((*store)->LoadCheckpoint(5)->empty());
  CHECK((*store)->IterationLogStats()->entries == 0);
}

TEST_CASE(
    "agent store: the iteration log has an explicit codec; damage and newer formats are errors") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  RunRecord r;
  r.key = "codec";
  const int64_t id = *(*store)->CreateRun(r);
  std::vector<IterationLogEntry> log = {{-7, 12, 1ull << 40, 3, 0, 12.5, 1.25e6},
                                        {101, 40, 2, 1, 9, 400.0, 0}};
  REQUIRE((*store)->SaveRun(SampleRun(id), {}, {}, log).ok());
  // Written as format 1: a header and little-endian fields, not the struct's bytes.
  auto row = (*store)->db().Prepare("SELECT format, length(data) FROM iteration_log");
  REQUIRE(row.ok());
  REQUIRE(*(*row)->Step());
  CHECK((*row)->Int(0) == kIterationLogFormat);
  CHECK((*row)->Int(1) == 8 + 2 * 44);
  row->reset();
  auto back = (*store)->LoadIterationLog(id);
  REQUIRE(back.ok());
  REQUIRE(back->size() == 2);
  CHECK((*back)[0].pid == -7);
  CHECK((*back)[0].iter == 1ull << 40);
  CHECK((*back)[0].time_ns == 1.25e6);
  CHECK((*back)[1].repeat == 9);
  CHECK((*back)[1].tokens == 400.0);

  SUBCASE("a truncated chunk names itself, not a best guess") {
    REQUIRE((*store)->db().Exec("UPDATE iteration_log SET data = substr(data, 1, 60)").ok());
    auto bad = (*store)->LoadIterationLog(id);
    REQUIRE(!bad.ok());
    CHECK(bad.status().message().find("run " + std::to_string(id) + " iteration-log chunk") !=
          std::string::npos);
    CHECK(bad.status().message().find("damaged") != std::string::npos);
  }
  SUBCASE("a legacy chunk of a size that fits neither layout is an error") {
    REQUIRE((*store)->db().Exec("UPDATE iteration_log SET format = 0").ok());
    auto bad = (*store)->LoadIterationLog(id);
    REQUIRE(!bad.ok());  // 88 bytes for 2 entries: neither 80 nor 64
  }
  SUBCASE("a newer format is Unsupported") {
    REQUIRE((*store)->db().Exec("UPDATE iteration_log SET format = 7").ok());
    auto bad = (*store)->LoadIterationLog(id);
    REQUIRE(!bad.ok());
    CHECK(bad.status().code() == seqpoint::ErrorCode::kUnsupported);
    CHECK(bad.status().message().find("newer seqpointd") != std::string::npos);
  }
}

TEST_CASE("agent store: SaveRuns writes every run of a flush or none") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  RunSnapshot a = SampleRun(0), b = SampleRun(0);
  a.run.id = 1;
  a.run.key = "a";
  b.run.id = 2;
  b.run.key = "b";
  a.run.iterations = b.run.iterations = 10;
  REQUIRE((*store)->SaveRuns({RunSave{&a}, RunSave{&b}}).ok());
  a.run.iterations = b.run.iterations = 20;
  // The second run's save fails half-way: the first one's must not stay saved.
  int statements = 0;
  (*store)->db().set_fault_hook([&](std::string_view sql) -> seqpoint::Status {
    if (sql.find("INSERT INTO runs") != std::string_view::npos && ++statements == 2) {
      return seqpoint::IoError("injected");
    }
    return seqpoint::Status::Ok();
  });
  CHECK(!(*store)->SaveRuns({RunSave{&a}, RunSave{&b}}).ok());
  (*store)->db().set_fault_hook({});
  CHECK((*store)->LoadRun(1)->run.iterations == 10);
  CHECK((*store)->LoadRun(2)->run.iterations == 10);
  CHECK(!(*store)->write_health().writable);
  REQUIRE((*store)->SaveRuns({RunSave{&a}, RunSave{&b}}).ok());
  CHECK((*store)->LoadRun(1)->run.iterations == 20);
  CHECK((*store)->LoadRun(2)->run.iterations == 20);
}

TEST_CASE("agent store: a run set aside keeps its rows, loses its log, reads as set_aside") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  RunRecord r;
  r.key = "broken";
  const int64_t id = *(*store)->CreateRun(r);
  std::vector<IterationLogEntry> log = {{100, 12, 0, 1, 1, 12.0, 0}};
  std::string image = "not a checkpoint";
  REQUIRE((*store)->SaveRun(SampleRun(id), {}, {}, log, &image).ok());
  REQUIRE((*store)->SetAsideRun(id, "run checkpoint: truncated").ok());
  auto snap = (*store)->LoadRun(id);
  REQUIRE(snap.ok());
  CHECK(snap->run.state == RunState::kSetAside);
  CHECK(RunStateName(snap->run.state) == "set_aside");
  CHECK(snap->run.end_reason == "run checkpoint: truncated");
  CHECK(snap->run.ended_unix_ns > 0);
  CHECK(snap->histogram.size() == 2);
  CHECK((*store)->LoadIterationLog(id)->empty());
  CHECK((*store)->LoadCheckpoint(id)->empty());
  CHECK((*store)->ListRuns(true, 10)->empty());
}
