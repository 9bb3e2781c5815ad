// RunTracker on the recorded trace: restore from the store's log rebuilds the same selection,
// and the log stays bounded once the budget is spent.
#include "agent/runs/run_tracker.h"

#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "agent/testing/test_util.h"
#include "common/clock.h"
#include "common/trace_csv.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;

namespace {

void Feed(RunTracker& t, const seqpoint::Trace& trace, size_t from, size_t to) {
  const int task = trace.MetricIndex("task_clock_ns");
  uint64_t clock = 1'000'000;
  for (size_t r = from; r < to; ++r) {
    auto d = t.Decide(42, trace.iter[r], trace.seq_len[r], trace.batch[r], trace.tokens[r]);
    std::vector<seqpoint::collectors::Sample> values;
    if (d.measure) values.push_back({"task_clock_ns", trace.metrics[task][r], "ns"});
    uint64_t dt = static_cast<uint64_t>(trace.metrics[trace.MetricIndex("time_ns")][r]);
    t.Complete(42, trace.iter[r], trace.seq_len[r], trace.batch[r], trace.tokens[r], clock,
               clock + dt, values);
    clock += dt + 1000;
    if (r % 7 == 3) (void)t.Snapshot();  // as /metrics scrapes and flushes do, at any time
  }
}

// A tracker of run 1 ("k") with these selector options.
std::unique_ptr<RunTracker> NewTracker(const seqpoint::selector::OnlineOptions& o) {
  RunRecord rec;
  rec.id = 1;
  rec.key = "k";
  auto t = RunTracker::Create(rec, o);
  REQUIRE(t.ok());
  return std::move(*t);
}

}  // namespace

TEST_CASE("agent run tracker: restoring from the log rebuilds the same selection, log bounded") {
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  seqpoint::selector::OnlineOptions o;
  o.budget_count = 30;
  auto a = NewTracker(o);
  Feed(*a, *trace, 0, 1000);
  std::vector<IterationLogEntry> log = a->TakeNewLog();
  std::vector<Measurement> meas = a->TakeNewMeasurements();
  // Task clock and time on each measured iteration, and a mark on each control (one in 4).
  size_t controls = 0;
  for (const auto& m : meas) controls += m.metric == "observer:control";
  CHECK(controls >= 30 / 4);
  CHECK(controls <= (30 + 3) / 4);
  CHECK(meas.size() == 2 * 30 + controls);
  CHECK(log.size() < 400);  // ordered until the budget went, aggregated after
  uint64_t logged = 0;
  for (const auto& e : log) logged += std::max<uint32_t>(1, e.repeat);
  CHECK(logged == 1000);
  RunSnapshot snap = a->Snapshot();
  auto b = RunTracker::Restore(snap, meas, log, o);
  REQUIRE(b.ok());
  RunSnapshot again = (*b)->Snapshot();
  REQUIRE(again.seqpoints.size() == snap.seqpoints.size());
  for (size_t i = 0; i < snap.seqpoints.size(); ++i) {
    CHECK(again.seqpoints[i].iters == snap.seqpoints[i].iters);
    CHECK(again.seqpoints[i].weight == snap.seqpoints[i].weight);
  }
  // Once a count budget is spent the log is aggregated by (pid, SL, batch): the replay gives
  // those iterations their mean time, in another order, so the time strata (and with them the
  // projections) come back close, not exact. A paced budget (the default, below) keeps order.
  REQUIRE(again.projections.size() == snap.projections.size());
  for (size_t i = 0; i < snap.projections.size(); ++i) {
    CHECK(again.projections[i].total == doctest::Approx(snap.projections[i].total).epsilon(0.02));
  }
  // Both continue with the same decisions.
  Feed(*a, *trace, 1000, 1500);
  Feed(**b, *trace, 1000, 1500);
  CHECK(a->Snapshot().projections[0].total ==
        doctest::Approx((*b)->Snapshot().projections[0].total).epsilon(0.02));
  CHECK((*b)->measured_iterations() == 30);
}

TEST_CASE("agent run tracker: a resumed run keeps its time strata, changes and projections") {
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  seqpoint::selector::OnlineOptions o;  // seqpointd's defaults: paced, capped
  o.budget_count = 4096;
  o.per_doubling = 16;
  o.warmup = 0;
  auto a = NewTracker(o);
  std::vector<IterationLogEntry> log;
  std::vector<Measurement> meas;
  // Flushes as the daemon does them, between iterations.
  for (size_t from = 0; from < 900; from += 150) {
    Feed(*a, *trace, from, from + 150);
    for (auto& e : a->TakeNewLog()) log.push_back(e);
    for (auto& m : a->TakeNewMeasurements()) meas.push_back(m);
  }
  const seqpoint::selector::TimeStrata& sa = a->strata();
  REQUIRE(sa.changes().size() >= 1);  // the recorded run's cost jumps 3-4x on a shared machine
  RunSnapshot snap = a->Snapshot();
  auto b = RunTracker::Restore(snap, meas, log, o);
  REQUIRE(b.ok());
  const seqpoint::selector::TimeStrata& sb = (*b)->strata();
  CHECK(sb.warmup_end() == sa.warmup_end());
  REQUIRE(sb.changes().size() == sa.changes().size());
  for (size_t i = 0; i < sa.changes().size(); ++i) {
    CHECK(sb.changes()[i].ordinal == sa.changes()[i].ordinal);
    CHECK(sb.changes()[i].direction == sa.changes()[i].direction);
  }
  CHECK(sb.Strata().size() == sa.Strata().size());
  RunSnapshot again = (*b)->Snapshot();
  REQUIRE(again.projections.size() == snap.projections.size());
  for (size_t i = 0; i < snap.projections.size(); ++i) {
    CHECK(again.projections[i].total == doctest::Approx(snap.projections[i].total));
    CHECK(again.projections[i].steady_total == doctest::Approx(snap.projections[i].steady_total));
  }
  Feed(*a, *trace, 900, 1500);
  Feed(**b, *trace, 900, 1500);
  CHECK(a->measured_iterations() == (*b)->measured_iterations());
  CHECK(a->Snapshot().projections[0].total ==
        doctest::Approx((*b)->Snapshot().projections[0].total));
}

// Time is the clock seam's (common/clock.h): a test moves it a day without waiting a day.
TEST_CASE("agent run tracker: records and per-day cost history follow the agent's clock") {
  seqpoint::FakeClock clock(int64_t{20000} * 86400 * 1'000'000'000);  // day 20000 (2024-10-04)
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  seqpoint::selector::OnlineOptions o;
  o.per_doubling = 16;
  auto t = NewTracker(o);
  Feed(*t, *trace, 0, 100);
  CHECK(t->record().updated_unix_ns == clock.WallNs());
  clock.Advance(int64_t{86400} * 1'000'000'000);  // the next day
  Feed(*t, *trace, 100, 200);
  std::set<int64_t> days;
  for (const BinCostRow& row : t->TakeCostDeltas()) days.insert(row.day);
  CHECK(days == std::set<int64_t>{20000, 20001});
}

TEST_CASE("agent run tracker: iterations never observed widen the whole-run total, honestly") {
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  REQUIRE(trace->iter.size() >= 1500);
  seqpoint::selector::OnlineOptions o;  // seqpointd's defaults
  o.budget_count = 4096;
  o.per_doubling = 16;
  o.warmup = 0;
  auto t = NewTracker(o);
  // The agent was down for iterations 500..799 of the recorded run (its cost moves 3-4x).
  Feed(*t, *trace, 0, 500);
  Feed(*t, *trace, 800, 1500);
  const uint64_t gap = trace->iter[800] - trace->iter[499] - 1;
  REQUIRE(gap == 300);
  CHECK(t->record().unobserved == gap);
  CHECK(t->record().iterations == 1200);
  double truth_time = 0, truth_task = 0, seen_time = 0;
  const int time = trace->MetricIndex("time_ns"), task = trace->MetricIndex("task_clock_ns");
  for (size_t r = 0; r < 1500; ++r) {
    truth_time += trace->metrics[time][r];
    truth_task += trace->metrics[task][r];
    if (r < 500 || r >= 800) seen_time += trace->metrics[time][r];
  }
  RunSnapshot s = t->Snapshot();
  for (const Projection& p : s.projections) {
    const double truth = p.metric == "time_ns" ? truth_time : truth_task;
    INFO(p.metric, " total ", p.total, " [", p.low, ", ", p.high, "] gap ", p.gap_total, " [",
         p.gap_low, ", ", p.gap_high, "] truth ", truth);
    CHECK(p.gap_total > 0);
    CHECK(p.gap_low < p.gap_total);
    CHECK(p.gap_high > p.gap_total);
    CHECK(p.low <= truth);
    CHECK(p.high >= truth);
  }
  // The self-check still compares the observed iterations with their own projection.
  SelfCheck c = t->self_check();
  REQUIRE(c.valid);
  CHECK(c.actual == doctest::Approx(seen_time));
  CHECK(std::abs(c.error) < 0.1);
}

TEST_CASE("agent run tracker: a run seen whole has no gap in its projections") {
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  seqpoint::selector::OnlineOptions o;
  o.budget_count = 4096;
  o.per_doubling = 16;
  auto t = NewTracker(o);
  Feed(*t, *trace, 0, 600);
  CHECK(t->record().unobserved == 0);
  for (const Projection& p : t->Snapshot().projections) CHECK(p.gap_total == 0);
}
