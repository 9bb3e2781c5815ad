// The overhead budget (runs.max_overhead) thins the selector's picks; it never defers them.
// Deferring (the design before: a pick over the budget kept its bin's want and pace slot, so
// the next candidate was taken once the run's time could pay) put the sample wherever the
// budget freed up, not where the design put it: a replayed run in agent_upload_test missed its
// time self-check by -8.4%, and on replayed recorded runs time projected +3.25% on average
// (bench/budget_share.py --hold defer). Thinning keeps the design's picks and measures a share
// of them, drawn at random. Replayed on the recorded real PyTorch runs with measuring costing
// one mean iteration (so the 2% cap binds hard), deferral emulated as the selector's path for a
// pick that cannot be measured.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "common/testing/scratch_dir.h"
#include "common/trace_csv.h"
#include "selector/estimate/whole_run_estimator.h"
#include "selector/online_selector.h"

using namespace seqpoint;
using namespace seqpoint::selector;

namespace {

enum class Hold { kNone, kThin, kDefer };
constexpr double kMaxOverhead = 0.02;

struct Replayed {
  std::vector<uint64_t> measured;  // ordinals
  uint64_t thinned = 0;
  double time_error = 0;  // the time self-check: projected from the measured, against the truth
  bool within = false;
};

Replayed Replay(const Trace& t, Hold hold) {
  const int time_col = t.MetricIndex("time_ns");
  REQUIRE(time_col >= 0);
  const std::vector<double>& times = t.metrics[static_cast<size_t>(time_col)];
  const size_t rows = times.size();
  double total = 0;
  for (double v : times) total += v;
  const double cost = total / static_cast<double>(rows);  // one mean iteration
  OnlineOptions o;  // seqpointd's budget (agent/daemon/daemon.cpp), no fixed warm-up
  o.budget_count = 4096;
  o.per_doubling = 16;
  o.warmup = 0;
  o.max_overhead = hold == Hold::kThin ? kMaxOverhead : 0;
  auto sel = OnlineSelector::Create(o);
  REQUIRE(sel.ok());
  sel->set_measurement_cost(cost);
  WholeRunInput in;
  in.strata = &sel->strata();
  in.timed = rows;
  Replayed out;
  double run_time = 0;
  for (size_t i = 0; i < rows; ++i) {
    const uint32_t batch = t.batch.empty() ? 0 : t.batch[i];
    // Deferring: over the budget a pick is lost and its bin's want kept, as for an iteration
    // that cannot be measured.
    const uint64_t m = sel->measured();
    const bool spent = hold == Hold::kDefer && m >= o.overhead_floor &&
                       static_cast<double>(m + 1) * cost > kMaxOverhead * run_time;
    const Decision d = sel->OnIteration(i, t.seq_len[i], batch, 0.0, !spent);
    sel->OnTime(i, t.seq_len[i], batch, times[i]);
    run_time += times[i];
    if (!d.measure) continue;
    out.measured.push_back(i);
    EstimatorIteration it;
    it.ordinal = i;
    it.seq_len = t.seq_len[i];
    it.batch = batch;
    it.time_ns = times[i];
    it.values.push_back({"time_ns", "ns", times[i], MetricKind::kDelta});
    in.measured.push_back(std::move(it));
  }
  const Selection cur = sel->Current();
  in.selection = &cur;
  in.actual["time_ns"] = {rows, total};
  const WholeRunEstimate e = EstimateWholeRun(in);
  REQUIRE(e.self_checks.size() == 1);
  out.thinned = sel->thinned();
  out.time_error = e.self_checks[0].error;
  out.within = e.self_checks[0].within_interval;
  return out;
}

}  // namespace

TEST_CASE("overhead budget: a pick it cannot pay for is thinned in place, never deferred") {
  for (const char* file :
       {"tests/data/agent/gru_debian_1500.csv", "tests/data/online/gru_random_slow_s1.csv",
        "tests/data/online/lstm_bucketed_s1.csv"}) {
    auto trace = LoadTrace(seqpoint::testing::SourceDir() + "/" + file);
    REQUIRE(trace.ok());
    const Replayed design = Replay(*trace, Hold::kNone);
    const Replayed thin = Replay(*trace, Hold::kThin);
    const Replayed defer = Replay(*trace, Hold::kDefer);
    const std::set<uint64_t> picks(design.measured.begin(), design.measured.end());
    auto off_design = [&](const Replayed& r) {
      return std::count_if(r.measured.begin(), r.measured.end(),
                           [&](uint64_t i) { return picks.count(i) == 0; });
    };
    // Thinned in place: what is measured is the design's picks less the thinned ones.
    CHECK(thin.thinned > 0);
    CHECK(off_design(thin) == 0);
    CHECK(thin.measured.size() + thin.thinned == design.measured.size());
    // Deferred: iterations the design never picked were measured in their place, wherever the
    // budget happened to free up (bench/budget_share.py --hold defer: time projected +3.25% on
    // average from such samples at 10^4 iterations, thinned -0.26%).
    CHECK(off_design(defer) > 0);
    MESSAGE(std::string(file), ": measured design/thin/defer ", design.measured.size(), "/",
            thin.measured.size(), "/", defer.measured.size(), ", thinned ", thin.thinned,
            ", off the design ", off_design(thin), "/", off_design(defer), "; time error ",
            design.time_error, "/", thin.time_error, "/", defer.time_error, " within ",
            design.within, "/", thin.within, "/", defer.within);
  }
}
