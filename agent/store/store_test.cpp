#include "agent/store/store.h"

#include <doctest/doctest.h>

#include <cmath>

#include "agent/testing/test_util.h"

using namespace seqpoint::daemon;

namespace {

RunSnapshot SampleRun(int64_t id) {
  RunSnapshot s;
  s.run.id = id;
  s.run.key = "job-7";
  s.run.pids = {100, 101};
  s.run.iterations = 30;
  s.run.max_iter = 29;
  s.histogram = {{12, 10, 1.2e9}, {40, 20, 4.0e9}};
  s.seqpoints = {{3, {3, 9}, {100, 100}, 12, 10, 1, 20}, {17, {17}, {101}, 40, 20, 21, 60}};
  s.projections = {{"time_ns", "ns", 5.1e9, 4.9e9, 5.3e9, 5.2e9, 3}};
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

TEST_CASE("agent store: a database from a newer schema is refused with a fix") {
  testing::TempDir dir;
  {
    auto db = SqliteDb::Open(dir.File("state.db"));
    REQUIRE(db.ok());
    REQUIRE((*db)->Exec("PRAGMA user_version = 99").ok());
  }
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(!store.ok());
  CHECK(store.status().message().find("newer") != std::string::npos);
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
          "ALTER TABLE projections DROP COLUMN bounded", "PRAGMA user_version = 1"}) {
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
  s.projections = {{"energy_uj", "uJ", 5e6, 4e6, 6e6, 3.5e6, 2, false},
                   {"perf:cycles", "count", 1e9, 9e8, 1.1e9, NAN, 2, true}};
  REQUIRE((*store)->SaveRun(s, {}, {}).ok());
  auto back = (*store)->LoadRun(id);
  REQUIRE(back.ok());
  CHECK(back->histogram[0].energy_uj_sum == 3.5e6);
  CHECK(back->histogram[0].energy_count == 7);
  REQUIRE(back->projections.size() == 2);
  CHECK(!back->projections[0].perturbed);
  CHECK(back->projections[1].perturbed);
}
