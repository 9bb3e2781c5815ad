// Time strata, drift detection and the stratified estimators on runs with warm-up, a mid-run
// slowdown and the faults a live agent meets (docs/estimators.md). Real recorded PyTorch runs
// go through the same code in tests/cli_test.cpp (`seqpoint evaluate --online`).
#include "selector/strata/time_strata.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "selector/estimate/stratified_projection.h"
#include "selector/online_selector.h"
#include "selector/strata/page_hinkley.h"
#include "selector/test_runs.h"

namespace seqpoint::selector {

using testing::DriftRun;
using testing::FirstSlower;
using testing::MakeDriftRun;
using testing::Online;
using testing::RunOnline;
using testing::Sum;

TEST_CASE("page-hinkley: quiet on stationary noise, quick on a doubling") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> z(0, 0.05);
  PageHinkley ph;
  int alarms = 0;
  for (int i = 0; i < 100000; ++i) alarms += ph.Add(z(rng), 0.05) != 0;
  CHECK(alarms == 0);
  PageHinkley up;
  for (int i = 0; i < 100; ++i) CHECK(up.Add(z(rng), 0.05) == 0);
  int found_after = -1;
  for (int i = 0; i < 100 && found_after < 0; ++i) {
    if (up.Add(std::log(2.0) + z(rng), 0.05) == 1) found_after = i + 1;
  }
  CHECK(found_after > 0);
  CHECK(found_after <= 15);
}

TEST_CASE("time strata: the warm-up is found from the times, not a fixed count") {
  for (size_t warmup : {0u, 60u, 150u}) {
    DriftRun d = MakeDriftRun(3000, 11, warmup, 1.6, SIZE_MAX, 1);
    TimeStrata t;
    for (size_t i = 0; i < d.run.time.size(); ++i) {
      t.Observe(i, d.run.seq_len[i], CostProxy(d.run.seq_len[i], d.run.batch[i]), d.run.time[i]);
    }
    INFO("warm-up " << warmup << " found " << t.warmup_end());
    CHECK(t.warmup_settled());
    // A fading warm-up ends where it drops below the 10% excess: before its nominal end.
    CHECK(t.warmup_end() <= warmup + 8);
    CHECK(t.warmup_end() + warmup / 2 + 16 >= warmup);
    // The tail of a fading warm-up may show as a change to faster; never one to slower.
    for (const TimeChange& c : t.changes()) CHECK(c.direction == -1);
  }
}

TEST_CASE("time strata: a slowdown mid-run is a change, found within tens of iterations") {
  DriftRun d = MakeDriftRun(4000, 3, 100, 1.5, 2500, 2.0);
  TimeStrata t;
  for (size_t i = 0; i < d.run.time.size(); ++i) {
    t.Observe(i, d.run.seq_len[i], CostProxy(d.run.seq_len[i], d.run.batch[i]), d.run.time[i]);
  }
  const TimeChange* slower = FirstSlower(t);
  REQUIRE(slower != nullptr);
  const TimeChange& c = *slower;
  CHECK(c.ordinal >= 2490);  // back-dated to where the slowdown began
  CHECK(c.ordinal < 2540);
  CHECK(c.direction == 1);
  CHECK(c.ratio == doctest::Approx(2.0).epsilon(0.15));
  CHECK(t.Strata()[t.StratumOf(3999)].kind == StratumKind::kChange);
}

TEST_CASE("online: the budget lasts the run, and each stretch of it is measured") {
  DriftRun d = MakeDriftRun(20000, 5, 100, 1.5, SIZE_MAX, 1);
  Online o = RunOnline(d);
  const auto& samples = o.sel.samples();
  // k per doubling: 16 * (1 + log2(20000 / 64)) ~ 148, plus 8 per change found.
  CHECK(samples.size() <= 149 + 8 * o.sel.strata().changes().size());
  CHECK(samples.size() >= 100);
  size_t late = 0;
  for (const auto& s : samples) late += s.iter >= 10000;
  CHECK(late >= 8);  // the last half of the run has its own measurements
}

TEST_CASE("stratified: warm-up and slowdown carry into counters through every iteration's time") {
  DriftRun d = MakeDriftRun(6000, 9, 120, 1.6, 3000, 2.0);
  Online o = RunOnline(d);
  const Selection bins = o.sel.Current();
  auto work = ProjectStratified(o.sel.strata(), bins, o.work_samples, Auxiliary::kTime);
  REQUIRE(work.ok());
  const double actual_work = Sum(d.work);
  CHECK(std::fabs(work->whole.total - actual_work) / actual_work < 0.03);
  CHECK(work->whole.low <= actual_work);
  CHECK(work->whole.high >= actual_work);
  auto time = ProjectStratified(o.sel.strata(), bins, o.time_samples, Auxiliary::kCost);
  REQUIRE(time.ok());
  CHECK(std::fabs(time->whole.total - d.run.total) / d.run.total < 0.05);
  CHECK(time->whole.low <= d.run.total);
  CHECK(time->whole.high >= d.run.total);
  // Steady state leaves the warm-up's iterations out.
  CHECK(time->steady.total < time->whole.total);
}

TEST_CASE("stratified: counts never get a negative bound, events the samples cannot bound say so") {
  DriftRun d = MakeDriftRun(2000, 4, 0, 1, SIZE_MAX, 1);
  Online o = RunOnline(d);
  std::vector<StrataSample> faults = o.work_samples;
  for (StrataSample& s : faults) s.value = 0;
  faults[faults.size() / 2].value = 5000;  // one page-in, when a longer SL first came
  auto p = ProjectStratified(o.sel.strata(), o.sel.Current(), faults, Auxiliary::kTime);
  REQUIRE(p.ok());
  CHECK_FALSE(p->bounded);
  CHECK(std::isinf(p->whole.high));
  CHECK(p->whole.low >= 0);
  CHECK(p->whole.total >= 0);
}

}  // namespace seqpoint::selector
