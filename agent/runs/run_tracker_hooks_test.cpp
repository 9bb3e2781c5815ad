// Begin hooks armed only while the selector has a free slot (RunTracker::WantsBegins), on the
// recorded trace. A live source applies a change of hooks late: the trainer runs ahead of the
// daemon, whose end records come in batches, so an iteration can arrive end-only while a slot
// is free. It is fed as "cannot measure" and logged so, and a restart replays the same
// decisions.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <deque>

#include "agent/runs/run_tracker.h"
#include "agent/store/iteration_log_codec.h"
#include "agent/testing/test_util.h"
#include "common/trace_csv.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;

namespace {

// The hooks as the trainer meets them: what WantsBegins said `lag` iterations before.
struct LiveHooks {
  std::deque<bool> pipe;
  uint64_t hooked = 0, fed = 0;
  uint64_t clock = 1'000'000;
};

LiveHooks StartHooks(RunTracker& t, size_t lag) {
  LiveHooks h;
  h.pipe.assign(lag + 1, t.WantsBegins());
  return h;
}

// Iterations [from, to) of the recorded run repeated end to end (row r % rows, index r).
// always_on: the hooks never turn off (the behaviour before the slots).
void FeedLive(RunTracker& t, const seqpoint::Trace& trace, uint64_t from, uint64_t to, LiveHooks& h,
              bool always_on = false) {
  const int time = trace.MetricIndex("time_ns"), task = trace.MetricIndex("task_clock_ns");
  const size_t rows = trace.iter.size();
  for (uint64_t r = from; r < to; ++r) {
    const size_t row = r % rows;
    const bool hooked = always_on || h.pipe.front();
    h.pipe.pop_front();
    std::vector<seqpoint::collectors::Sample> values;
    if (hooked) {
      auto d = t.Decide(42, r, trace.seq_len[row], trace.batch[row], trace.tokens[row]);
      if (d.measure && !t.IsControl(42, r)) {
        values.push_back({"task_clock_ns", trace.metrics[task][row], "ns"});
      }
    }
    const uint64_t dt = static_cast<uint64_t>(trace.metrics[time][row]);
    t.Complete(42, r, trace.seq_len[row], trace.batch[row], trace.tokens[row], h.clock,
               h.clock + dt, values);
    h.clock += dt + 1000;
    h.hooked += hooked;
    ++h.fed;
    h.pipe.push_back(t.WantsBegins());
  }
}

seqpoint::selector::OnlineOptions Defaults() {
  seqpoint::selector::OnlineOptions o;  // seqpointd's defaults: paced, capped
  o.budget_count = 4096;
  o.per_doubling = 16;
  o.warmup = 0;
  return o;
}

std::unique_ptr<RunTracker> NewTracker(const seqpoint::selector::OnlineOptions& o) {
  RunRecord rec;
  rec.id = 1;
  rec.key = "k";
  auto t = RunTracker::Create(rec, o);
  REQUIRE(t.ok());
  return std::move(*t);
}

void CheckSameSelection(RunTracker& a, RunTracker& b) {
  RunSnapshot sa = a.Snapshot(), sb = b.Snapshot();
  CHECK(a.measured_iterations() == b.measured_iterations());
  REQUIRE(sa.seqpoints.size() == sb.seqpoints.size());
  for (size_t i = 0; i < sa.seqpoints.size(); ++i) {
    CHECK(sa.seqpoints[i].iters == sb.seqpoints[i].iters);
    CHECK(sa.seqpoints[i].weight == sb.seqpoints[i].weight);
  }
  REQUIRE(sa.projections.size() == sb.projections.size());
  for (size_t i = 0; i < sa.projections.size(); ++i) {
    CHECK(sa.projections[i].total == doctest::Approx(sb.projections[i].total));
  }
}

double Truth(const seqpoint::Trace& trace, const std::string& metric, uint64_t n) {
  const int m = trace.MetricIndex(metric);
  double sum = 0;
  for (uint64_t r = 0; r < n; ++r) sum += trace.metrics[m][r % trace.iter.size()];
  return sum;
}

}  // namespace

TEST_CASE("agent run tracker hooks: off between the slots of a paced budget, a restart replays") {
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  auto a = NewTracker(Defaults());
  LiveHooks ha = StartHooks(*a, 4);
  std::vector<IterationLogEntry> log;
  std::vector<Measurement> meas;
  for (uint64_t from = 0; from < 12000; from += 1000) {  // flushes, as the daemon's
    FeedLive(*a, *trace, from, from + 1000, ha);
    for (auto& e : a->TakeNewLog()) log.push_back(e);
    for (auto& m : a->TakeNewMeasurements()) meas.push_back(m);
  }
  INFO("hooked ", ha.hooked, " of ", ha.fed, ", measured ", a->measured_iterations(), ", end-only ",
       a->unmeasurable_iterations(), ", lost candidates ", a->missed_candidates());
  // The hooks were off for most of the run (on for every iteration before the slots).
  CHECK(ha.hooked < ha.fed / 2);
  MESSAGE("12,000 iterations: ", ha.hooked, " hooked, ", a->measured_iterations(), " measured, ",
          a->unmeasurable_iterations(), " end-only, ", a->missed_candidates(), " candidates lost");
  CHECK(a->measured_iterations() > 0);
  CHECK(a->unmeasurable_iterations() == ha.fed - ha.hooked);
  // Every end-only iteration says so in the log, none of the others.
  uint64_t flagged = 0;
  for (const auto& e : log) flagged += (e.flags & kIterationLogUnmeasurable) != 0;
  CHECK(flagged == ha.fed - ha.hooked);

  // A restart on what was stored (the log went through the codec) replays the same decisions.
  std::vector<IterationLogEntry> stored;
  REQUIRE(DecodeIterationLog(kIterationLogFormat, EncodeIterationLog(log),
                             static_cast<int64_t>(log.size()), "test", &stored)
              .ok());
  auto b = RunTracker::Restore(a->Snapshot(), meas, stored, Defaults());
  REQUIRE(b.ok());
  CheckSameSelection(*a, **b);
  // And both go on alike: the restarted one meets the hooks the trainer had.
  LiveHooks hb = ha;
  FeedLive(*a, *trace, 12000, 15000, ha);
  FeedLive(**b, *trace, 12000, 15000, hb);
  CHECK(ha.hooked == hb.hooked);
  CheckSameSelection(*a, **b);
}

TEST_CASE("agent run tracker hooks: accuracy as with the hooks always on, on the recorded run") {
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  const uint64_t n = trace->iter.size() * 4;
  auto on = NewTracker(Defaults());
  auto slots = NewTracker(Defaults());
  LiveHooks h_on = StartHooks(*on, 0), h_slots = StartHooks(*slots, 4);
  FeedLive(*on, *trace, 0, n, h_on, /*always_on=*/true);
  FeedLive(*slots, *trace, 0, n, h_slots);
  // A short run's slots are dense (and the hooks are armed hook_lead iterations ahead of each):
  // fewer hooked iterations, not few, here; the long run above shows the hooks off.
  CHECK(h_slots.hooked < h_on.hooked);
  MESSAGE("6,000 iterations: ", h_slots.hooked, " hooked, ", slots->measured_iterations(),
          " measured (always on: ", on->measured_iterations(), ")");
  CHECK(slots->measured_iterations() == doctest::Approx(on->measured_iterations()).epsilon(0.05));
  for (const std::string metric : {"time_ns", "task_clock_ns"}) {
    const double truth = Truth(*trace, metric, n);
    auto find = [&](RunTracker& t) {
      for (const Projection& p : t.Snapshot().projections) {
        if (p.metric == metric) return p;
      }
      FAIL("no projection of " << metric);
      return Projection{};
    };
    const Projection p_on = find(*on), p_slots = find(*slots);
    const double e_on = (p_on.total - truth) / truth, e_slots = (p_slots.total - truth) / truth;
    INFO(metric, ": error always on ", e_on, " [", (p_on.low - truth) / truth, ", ",
         (p_on.high - truth) / truth, "], in slots ", e_slots, " [", (p_slots.low - truth) / truth,
         ", ", (p_slots.high - truth) / truth, "], ", h_slots.hooked, " of ", n, " hooked");
    // Another sample of the same size and design: its interval still holds the truth, and its
    // error is within the noise the always-on run's own interval states (a bias from the
    // end-only iterations would show as an error beyond it).
    CHECK(p_slots.low <= truth);
    CHECK(p_slots.high >= truth);
    CHECK(std::abs(p_slots.total - truth) < (p_on.high - p_on.low) / 2);
  }
}

TEST_CASE("agent run tracker hooks: a log of the previous codec (v1, schema v6) still restores") {
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  auto a = NewTracker(Defaults());
  LiveHooks h = StartHooks(*a, 0);
  FeedLive(*a, *trace, 0, 1200, h, /*always_on=*/true);  // as the previous daemon fed it
  std::vector<IterationLogEntry> log = a->TakeNewLog();
  std::vector<Measurement> meas = a->TakeNewMeasurements();
  // The chunk as the previous seqpointd wrote it: "SPIL", version 1, 40 little-endian bytes an
  // entry, no flags.
  std::string v1 = "SPIL";
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) v1.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(1, 4);
  for (const IterationLogEntry& e : log) {
    put(static_cast<uint32_t>(e.pid), 4);
    put(e.seq_len, 4);
    put(e.iter, 8);
    put(e.batch, 4);
    put(e.repeat, 4);
    put(std::bit_cast<uint64_t>(e.tokens), 8);
    put(std::bit_cast<uint64_t>(e.time_ns), 8);
  }
  std::vector<IterationLogEntry> read;
  REQUIRE(DecodeIterationLog(kIterationLogFormat, v1, static_cast<int64_t>(log.size()), "v1", &read)
              .ok());
  REQUIRE(read.size() == log.size());
  for (const auto& e : read) CHECK(e.flags == 0);
  auto b = RunTracker::Restore(a->Snapshot(), meas, read, Defaults());
  REQUIRE(b.ok());
  CheckSameSelection(*a, **b);

  // A codec version above this build's is refused, never misread.
  std::string v9 = v1;
  v9[4] = 9;
  std::vector<IterationLogEntry> none;
  seqpoint::Status st =
      DecodeIterationLog(kIterationLogFormat, v9, static_cast<int64_t>(log.size()), "v9", &none);
  CHECK(st.code() == seqpoint::ErrorCode::kUnsupported);
}

TEST_CASE("agent run tracker hooks: the overhead budget is kept, reported, and replayed") {
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  seqpoint::selector::OnlineOptions o = Defaults();
  o.max_overhead = 0.01;
  auto a = NewTracker(o);
  auto uncapped = NewTracker(Defaults());
  // Measuring doubles an iteration's time here (a heavy collector): its cost is learnt from the
  // measured iterations against their SL's mean.
  const int time = trace->MetricIndex("time_ns");
  std::vector<IterationLogEntry> log;
  std::vector<Measurement> meas;
  for (RunTracker* t : {a.get(), uncapped.get()}) {
    uint64_t clock = 1'000'000;
    for (uint64_t r = 0; r < 6000; ++r) {
      const size_t row = r % trace->iter.size();
      auto d = t->Decide(42, r, trace->seq_len[row], trace->batch[row], trace->tokens[row]);
      uint64_t dt = static_cast<uint64_t>(trace->metrics[time][row]);
      if (d.measure && !t->IsControl(42, r)) dt *= 2;
      t->Complete(42, r, trace->seq_len[row], trace->batch[row], trace->tokens[row], clock,
                  clock + dt, {});
      clock += dt + 1000;
      if (t == a.get() && r % 1000 == 999) {
        for (auto& e : t->TakeNewLog()) log.push_back(e);
        for (auto& m : t->TakeNewMeasurements()) meas.push_back(m);
      }
    }
  }
  const MeasurementCost c = a->measurement_cost();
  INFO("capped: ", a->measured_iterations(), " measured, cost ", c.per_measured_ns, " ns (",
       c.source, "), share ", c.share, ", over budget ", c.over_budget, "; uncapped ",
       uncapped->measured_iterations());
  CHECK(c.source != "none");
  CHECK(c.per_measured_ns > 0);
  CHECK(c.over_budget > 0);
  CHECK(a->measured_iterations() < uncapped->measured_iterations());
  // The share it reports is what it kept to, by the end of the doubling window the run is in
  // (4,096-8,192 iterations: the budget is spent at one rate across each window), but for the
  // run's first few (overhead_floor) and each stratum's (min_samples_per_stratum: the warm-up,
  // each window, each change), which are never thinned (the cost estimate also moved while it
  // learnt).
  const double strata =
      2 + std::log2(6000.0 / 64) + static_cast<double>(a->strata().changes().size());
  const double spared = o.overhead_floor + o.min_samples_per_stratum * strata;
  CHECK(c.share <= o.max_overhead * 8192 / 6000 +
                       spared * c.per_measured_ns / a->Snapshot().projections[0].actual);
  uint64_t flagged = 0;
  for (const auto& e : log) flagged += (e.flags & kIterationLogOverBudget) != 0;
  CHECK(flagged == c.over_budget);
  // The replay declines the same candidates without the live cost behind them.
  auto b = RunTracker::Restore(a->Snapshot(), meas, log, o);
  REQUIRE(b.ok());
  CheckSameSelection(*a, **b);
}
