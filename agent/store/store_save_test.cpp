// A flush writes only the rows that changed (store_save.cpp), and what the file holds is always
// what the last committed flush was given: after a failed flush too, and across a reopen.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "agent/store/store.h"
#include "agent/testing/test_util.h"

using namespace seqpoint::daemon;

namespace {

RunSnapshot Run(int64_t id, int bins) {
  RunSnapshot s;
  s.run.id = id;
  s.run.key = "job-" + std::to_string(id);
  s.run.pids = {100};
  for (int b = 0; b < bins; ++b) {
    s.histogram.push_back({static_cast<uint32_t>(16 * (b + 1)), 3, 3e6, 0, 0, 3});
  }
  s.seqpoints = {{3, {3, 9}, {100, 100}, 16, 10, 16, 31}};
  for (const char* m : {"time_ns", "perf:cycles"}) {
    Projection p;
    p.metric = m;
    p.unit = "count";
    p.total = 1e9;
    p.low = 9e8;
    p.high = 1.1e9;
    s.projections.push_back(p);
  }
  return s;
}

uint64_t Written(Store& store) { return store.write_counts().rows_written; }

// The run as the file holds it, compared with what was saved.
void CheckStored(Store& store, const RunSnapshot& want) {
  auto got = store.LoadRun(want.run.id);
  REQUIRE(got.ok());
  CHECK(got->run.iterations == want.run.iterations);
  REQUIRE(got->histogram.size() == want.histogram.size());
  for (size_t i = 0; i < want.histogram.size(); ++i) {
    CHECK(got->histogram[i].seq_len == want.histogram[i].seq_len);
    CHECK(got->histogram[i].count == want.histogram[i].count);
    CHECK(got->histogram[i].time_ns_sum == want.histogram[i].time_ns_sum);
  }
  REQUIRE(got->seqpoints.size() == want.seqpoints.size());
  for (size_t i = 0; i < want.seqpoints.size(); ++i) {
    CHECK(got->seqpoints[i].iters == want.seqpoints[i].iters);
    CHECK(got->seqpoints[i].weight == want.seqpoints[i].weight);
  }
  REQUIRE(got->projections.size() == want.projections.size());
  for (const Projection& w : want.projections) {  // stored by metric
    auto it = std::find_if(got->projections.begin(), got->projections.end(),
                           [&w](const Projection& p) { return p.metric == w.metric; });
    REQUIRE(it != got->projections.end());
    CHECK(it->total == w.total);
  }
}

}  // namespace

TEST_CASE("agent store: a flush writes only the rows that changed") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  Store& s = **store;
  RunSnapshot run = Run(1, 50);
  REQUIRE(s.SaveRuns({RunSave{&run}}).ok());
  // The run row, 50 bins, 1 SeqPoint, 2 projections.
  CHECK(Written(s) == 54);

  uint64_t before = Written(s);
  run.run.iterations = 1;
  REQUIRE(s.SaveRuns({RunSave{&run}}).ok());
  CHECK(Written(s) - before == 1);  // the run row only
  CHECK(s.write_counts().rows_unchanged >= 53);

  before = Written(s);
  run.histogram[7].count += 1;
  run.histogram[7].time_ns_sum += 1e6;
  run.histogram.push_back({4096, 1, 2e6, 0, 0, 1});  // a new SL
  run.projections[1].total = 1.2e9;
  run.seqpoints[0].weight = 11;
  REQUIRE(s.SaveRuns({RunSave{&run}}).ok());
  // The run row, 2 bins, the SeqPoint set (1 row), 1 projection.
  CHECK(Written(s) - before == 5);
  CheckStored(s, run);

  // A NaN stays equal to itself: an unchanged projection without `actual` is not rewritten.
  run.projections[0].actual = NAN;
  REQUIRE(s.SaveRuns({RunSave{&run}}).ok());
  before = Written(s);
  REQUIRE(s.SaveRuns({RunSave{&run}}).ok());
  CHECK(Written(s) - before == 1);
}

TEST_CASE("agent store: after a failed flush the next one writes what the file lacks") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  Store& s = **store;
  RunSnapshot a = Run(1, 20), b = Run(2, 20);
  REQUIRE(s.SaveRuns({RunSave{&a}, RunSave{&b}}).ok());
  a.histogram[3].count = 9;
  b.projections[0].total = 2e9;
  b.seqpoints[0].iters.push_back(12);
  // Fails at the commit: every row was written, then rolled back.
  s.db().set_fault_hook([](std::string_view sql) -> seqpoint::Status {
    if (sql == "COMMIT") return seqpoint::IoError("injected");
    return seqpoint::Status::Ok();
  });
  CHECK(!s.SaveRuns({RunSave{&a}, RunSave{&b}}).ok());
  s.db().set_fault_hook({});
  CHECK(s.LoadRun(1)->histogram[3].count == 3);
  // Nothing changed since the failed flush, but the file lacks its rows: they are written.
  REQUIRE(s.SaveRuns({RunSave{&a}, RunSave{&b}}).ok());
  CheckStored(s, a);
  CheckStored(s, b);
}

TEST_CASE("agent store: a reopened store writes a resumed run whole, then only its changes") {
  testing::TempDir dir;
  RunSnapshot run = Run(1, 30);
  {
    auto store = Store::Open(dir.File("state.db"));
    REQUIRE(store.ok());
    REQUIRE((*store)->SaveRuns({RunSave{&run}}).ok());
  }
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  Store& s = **store;
  run.histogram[0].count = 5;
  REQUIRE(s.SaveRuns({RunSave{&run}}).ok());
  CHECK(Written(s) == 34);  // nothing known of the file's rows yet: all of them
  const uint64_t before = Written(s);
  run.histogram[1].count = 5;
  REQUIRE(s.SaveRuns({RunSave{&run}}).ok());
  CHECK(Written(s) - before == 2);
  CheckStored(s, run);
  // A closed run's save drops its log and checkpoint and its digests; its rows stay.
  run.run.state = RunState::kFinished;
  REQUIRE(s.SaveRuns({RunSave{&run}}).ok());
  CheckStored(s, run);
  CHECK(s.ListRuns(true, 10)->empty());
}

TEST_CASE("agent store: a gauge's kind, peak and bins round-trip, a delta reads as before") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  Store& s = **store;
  RunSnapshot run = Run(1, 4);
  Projection power;
  power.metric = "gpu:power";
  power.unit = "W";
  power.kind = 1;
  power.total = 310;  // a time-weighted mean, not a sum
  power.low = 300;
  power.high = 320;
  power.peak = 402;
  power.bins = {{16, 31, 290, 350, 24, 12}, {32, 63, 330, 402, 48, 7}};
  run.projections.push_back(power);
  REQUIRE(s.SaveRuns({RunSave{&run}}).ok());
  auto back = s.LoadRun(1);
  REQUIRE(back.ok());
  auto find = [&](const std::string& m) {
    return *std::find_if(back->projections.begin(), back->projections.end(),
                         [&m](const Projection& p) { return p.metric == m; });
  };
  const Projection got = find("gpu:power");
  CHECK(got.kind == 1);
  CHECK(got.peak == 402);
  REQUIRE(got.bins.size() == 2);
  CHECK(got.bins[1].bin_lo == 32);
  CHECK(got.bins[1].mean == 330);
  CHECK(got.bins[1].peak == 350 + 52);
  CHECK(got.bins[1].peak_seq_len == 48);
  CHECK(got.bins[1].samples == 7);
  const Projection delta = find("time_ns");
  CHECK(delta.kind == 0);
  CHECK(std::isnan(delta.peak));
  CHECK(delta.bins.empty());

  // A bin that moved rewrites the gauge's bins whole; one that did not, nothing.
  uint64_t before = Written(s);
  run.projections.back().bins.pop_back();
  REQUIRE(s.SaveRuns({RunSave{&run}}).ok());
  CHECK(Written(s) - before == 3);  // run row, projection row, one bin
  CHECK(s.LoadRun(1)->projections.back().metric == "time_ns");
  back = s.LoadRun(1);
  CHECK(find("gpu:power").bins.size() == 1);
  before = Written(s);
  REQUIRE(s.SaveRuns({RunSave{&run}}).ok());
  CHECK(Written(s) - before == 1);
}
