// A run restored from a checkpoint and the log saved after it is the run restored from its
// whole log: the same strata, changes, projections and later decisions (the log bound of
// docs/bounds.md costs nothing on resume).
#include <doctest/doctest.h>

#include "agent/runs/run_tracker.h"
#include "agent/testing/test_util.h"
#include "common/trace_csv.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;

namespace {

void FeedRows(RunTracker& t, const seqpoint::Trace& trace, size_t from, size_t to) {
  const int task = trace.MetricIndex("task_clock_ns");
  const int time = trace.MetricIndex("time_ns");
  uint64_t clock = 1'000'000 + from * 1'000'000'000ull;
  for (size_t r = from; r < to; ++r) {
    auto d = t.Decide(42, trace.iter[r], trace.seq_len[r], trace.batch[r], trace.tokens[r]);
    std::vector<seqpoint::collectors::Sample> values;
    if (d.measure) values.push_back({"task_clock_ns", trace.metrics[task][r], "ns"});
    uint64_t dt = static_cast<uint64_t>(trace.metrics[time][r]);
    t.Complete(42, trace.iter[r], trace.seq_len[r], trace.batch[r], trace.tokens[r], clock,
               clock + dt, values);
    clock += dt + 1000;
  }
}

}  // namespace

TEST_CASE("agent run checkpoint: checkpoint plus the later log restores the run exactly") {
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  seqpoint::selector::OnlineOptions o;  // seqpointd's defaults: paced, capped
  o.budget_count = 4096;
  o.per_doubling = 16;
  o.warmup = 0;
  RunRecord rec;
  rec.id = 1;
  rec.key = "k";
  auto a = RunTracker::Create(rec, o);
  REQUIRE(a.ok());
  std::vector<Measurement> meas;
  std::vector<IterationLogEntry> full, after;
  std::string checkpoint;
  for (size_t from = 0; from < 900; from += 150) {  // flushes between iterations
    FeedRows(**a, *trace, from, from + 150);
    for (auto& e : (*a)->TakeNewLog()) {
      full.push_back(e);
      if (!checkpoint.empty()) after.push_back(e);
    }
    for (auto& m : (*a)->TakeNewMeasurements()) meas.push_back(m);
    if (from == 300) checkpoint = (*a)->Checkpoint();  // stands for the 450 iterations so far
  }
  REQUIRE(after.size() == 450);
  RunSnapshot snap = (*a)->Snapshot();
  auto whole = RunTracker::Restore(snap, meas, full, o);
  auto cut = RunTracker::Restore(snap, meas, after, o, checkpoint);
  REQUIRE(whole.ok());
  REQUIRE_MESSAGE(cut.ok(), cut.status().ToString());
  CHECK((*cut)->Checkpoint() == (*whole)->Checkpoint());
  CHECK((*cut)->Checkpoint() == (*a)->Checkpoint());
  const auto& sa = (*a)->strata();
  const auto& sc = (*cut)->strata();
  REQUIRE(sa.changes().size() >= 1);
  CHECK(sc.changes().size() == sa.changes().size());
  CHECK(sc.warmup_end() == sa.warmup_end());
  RunSnapshot again = (*cut)->Snapshot();
  REQUIRE(again.projections.size() == snap.projections.size());
  for (size_t i = 0; i < snap.projections.size(); ++i) {
    CHECK(again.projections[i].total == doctest::Approx(snap.projections[i].total));
    CHECK(again.projections[i].steady_total == doctest::Approx(snap.projections[i].steady_total));
  }
  CHECK(again.run.unobserved == snap.run.unobserved);
  FeedRows(**a, *trace, 900, 1500);
  FeedRows(**cut, *trace, 900, 1500);
  CHECK((*a)->measured_iterations() == (*cut)->measured_iterations());
  CHECK((*a)->Checkpoint() == (*cut)->Checkpoint());
  CHECK((*a)->record().unobserved == (*cut)->record().unobserved);
}

TEST_CASE("agent run checkpoint: a damaged checkpoint is an error naming the run") {
  seqpoint::selector::OnlineOptions o;
  o.per_doubling = 16;
  RunRecord rec;
  rec.id = 7;
  auto a = RunTracker::Create(rec, o);
  REQUIRE(a.ok());
  std::string image = (*a)->Checkpoint();
  auto cut = RunTracker::Restore({rec, {}, {}, {}}, {}, {}, o, image.substr(0, image.size() / 2));
  REQUIRE(!cut.ok());
  CHECK(cut.status().message().find("run 7") != std::string::npos);
}
