// The whole-run estimator seqpointd and `seqpoint evaluate --online` share: kinds, the
// unobserved gap, the observer correction and the self-checks.
#include "selector/estimate/whole_run_estimator.h"

#include <doctest/doctest.h>

#include <cmath>

#include "selector/test_runs.h"

namespace seqpoint::selector {

using testing::DriftRun;
using testing::MakeDriftRun;

namespace {

struct Fixture {
  DriftRun d;
  OnlineSelector sel = *OnlineSelector::Create([] {
    OnlineOptions o;
    o.per_doubling = 16;
    o.warmup = 0;
    return o;
  }());
  Selection current;
  WholeRunInput in;
  double actual_time = 0;

  // power: a gauge of 100 W in the first half, 300 W in the second (time-weighted mean ~200).
  explicit Fixture(double slowdown = 1, uint64_t seed = 21)
      : d(MakeDriftRun(3000, seed, 0, 1, SIZE_MAX, 1)) {
    for (size_t i = 0; i < d.run.seq_len.size(); ++i) {
      const Decision dec = sel.OnIteration(i, d.run.seq_len[i], d.run.batch[i], 0);
      double t = d.run.time[i];
      if (dec.measure) t *= slowdown;
      sel.OnTime(i, d.run.seq_len[i], d.run.batch[i], t);
      actual_time += t;
      if (!dec.measure) continue;
      EstimatorIteration it{i, d.run.seq_len[i], d.run.batch[i], t, std::nullopt, {}};
      if (slowdown != 1) it.slowdown = Slowdown{slowdown, slowdown * 0.98, slowdown * 1.02};
      it.values.push_back({"time_ns", "ns", t, MetricKind::kDelta});
      it.values.push_back({"cpu_ns", "ns", d.work[i], MetricKind::kDelta});
      it.values.push_back({"power", "W", i < 1500 ? 100.0 : 300.0, MetricKind::kGauge});
      it.values.push_back({"gpu_mem", "bytes", Memory(i), MetricKind::kGauge});
      it.values.push_back({"capacity", "bytes", 16e9, MetricKind::kGauge});
      in.measured.push_back(std::move(it));
    }
    current = sel.Current();
    in.strata = &sel.strata();
    in.selection = &current;
    in.timed = d.run.seq_len.size();
    in.actual["time_ns"] = {in.timed, actual_time};
  }
  // GPU memory in use: 1 GB plus 10 MB per SL token, +-2% by iteration (allocator caching).
  double Memory(size_t i) const {
    return 1e9 + 1e7 * d.run.seq_len[i] * (1 + 0.02 * std::sin(static_cast<double>(i)));
  }
};

}  // namespace

TEST_CASE("whole run: deltas are totals, gauges are time-weighted means and peaks") {
  Fixture f;
  WholeRunEstimate e = EstimateWholeRun(f.in);
  const WholeRunProjection* cpu = e.Find("cpu_ns");
  const WholeRunProjection* power = e.Find("power");
  REQUIRE(cpu != nullptr);
  REQUIRE(power != nullptr);
  double work = 0;
  for (double w : f.d.work) work += w;
  CHECK(cpu->kind == MetricKind::kDelta);
  CHECK(cpu->total == doctest::Approx(work).epsilon(0.05));
  CHECK(power->kind == MetricKind::kGauge);
  CHECK(power->total > 150);  // a mean in watts, not a sum over iterations
  CHECK(power->total < 250);
  CHECK(power->low <= power->total);
  CHECK(power->peak == 300);
  CHECK(!power->bins.empty());
  REQUIRE(e.self_checks.size() == 1);
  const WholeRunSelfCheck& c = e.self_checks[0];
  CHECK(c.valid);
  CHECK(std::fabs(c.error) < 0.05);
  CHECK(std::fabs(c.independent_error) < 0.05);
}

TEST_CASE("whole run: the unobserved gap widens the totals, never the gauges") {
  Fixture f;
  WholeRunEstimate before = EstimateWholeRun(f.in);
  f.in.unobserved = 300;
  f.in.spread_n = 2;
  f.in.spread_sum = 2e6;
  f.in.spread_sumsq = 2.2e12;
  WholeRunEstimate after = EstimateWholeRun(f.in);
  const WholeRunProjection* a = after.Find("cpu_ns");
  const WholeRunProjection* b = before.Find("cpu_ns");
  CHECK(a->total == doctest::Approx(b->total * 1.1));
  CHECK(a->gap_total == doctest::Approx(b->total * 0.1));
  CHECK(a->high - a->low > b->high - b->low);
  CHECK(after.Find("power")->total == doctest::Approx(before.Find("power")->total));
  // The self-check compares the observed iterations: the gap does not enter it.
  CHECK(after.self_checks[0].error == doctest::Approx(before.self_checks[0].error));
}

TEST_CASE("whole run: a measured iteration slowed by its measurement is corrected for time") {
  Fixture f(1.2);  // every measured iteration 20% slower
  WholeRunEstimate e = EstimateWholeRun(f.in);
  const WholeRunProjection* time = e.Find("time_ns");
  REQUIRE(time != nullptr);
  CHECK(time->total == doctest::Approx(f.d.run.total).epsilon(0.05));
  CHECK(e.Find("cpu_ns")->perturbed);  // a counter cannot be corrected: flagged
  CHECK(e.self_checks[0].observer_ratio == doctest::Approx(1.2));
  CHECK(e.self_checks[0].observer_excess > 0);
}

}  // namespace seqpoint::selector

namespace seqpoint::selector {

TEST_CASE("whole run: a memory gauge is a time-weighted mean with a peak per SL bin") {
  Fixture f;
  WholeRunEstimate e = EstimateWholeRun(f.in);
  const WholeRunProjection* mem = e.Find("gpu_mem");
  REQUIRE(mem != nullptr);
  CHECK(mem->kind == MetricKind::kGauge);
  // The truth: the run's memory weighted by every iteration's time, measured or not.
  double vt = 0, t = 0, peak = 0;
  for (size_t i = 0; i < f.d.run.seq_len.size(); ++i) {
    vt += f.Memory(i) * f.d.run.time[i];
    t += f.d.run.time[i];
  }
  for (const EstimatorIteration& it : f.in.measured) peak = std::max(peak, f.Memory(it.ordinal));
  const double truth = vt / t;
  CHECK(mem->total == doctest::Approx(truth).epsilon(0.03));
  CHECK(mem->bounded);
  CHECK(mem->low <= mem->total);  // coverage of the truth: the next test, over 30 runs
  CHECK(mem->high >= mem->total);
  CHECK(mem->peak == peak);
  // Per bin: mean and peak of the bin's measured iterations, rising with the bin's SLs.
  REQUIRE(mem->bins.size() >= 3);
  uint64_t samples = 0;
  for (size_t b = 0; b < mem->bins.size(); ++b) {
    const BinMean& bin = mem->bins[b];
    samples += bin.samples;
    CHECK(bin.peak >= bin.mean);
    CHECK(bin.mean >= 1e9 + 1e7 * bin.bin_lo * 0.98);
    CHECK(bin.peak <= 1e9 + 1e7 * bin.bin_hi * 1.02);
    if (b > 0) CHECK(bin.mean > mem->bins[b - 1].mean);
  }
  CHECK(samples == mem->samples);
  // A constant reading is its own mean, exactly, whatever the strata (bins never sampled take
  // the reading their cost predicts, not a value over a time they were never measured at); its
  // interval is the variance floor's, narrow.
  const WholeRunProjection* cap = e.Find("capacity");
  REQUIRE(cap != nullptr);
  CHECK(cap->total == doctest::Approx(16e9).epsilon(1e-9));
  CHECK(cap->low <= 16e9);
  CHECK(cap->high >= 16e9);
  CHECK(cap->high - cap->low < 0.01 * 16e9);
}

}  // namespace seqpoint::selector

namespace seqpoint::selector {

TEST_CASE("whole run: the gauge mean's interval covers the run's time-weighted mean") {
  int covered = 0, runs = 0;
  double worst = 0;
  for (uint64_t seed = 100; seed < 130; ++seed) {
    Fixture f(1, seed);
    const WholeRunEstimate e = EstimateWholeRun(f.in);
    const WholeRunProjection* mem = e.Find("gpu_mem");
    REQUIRE(mem != nullptr);
    double vt = 0, t = 0;
    for (size_t i = 0; i < f.d.run.seq_len.size(); ++i) {
      vt += f.Memory(i) * f.d.run.time[i];
      t += f.d.run.time[i];
    }
    const double truth = vt / t;
    ++runs;
    covered += mem->low <= truth && truth <= mem->high;
    worst = std::max(worst, std::fabs(mem->total - truth) / truth);
  }
  MESSAGE("gauge mean: 95% interval covers in ", covered, " of ", runs, " runs; worst error ",
          worst);
  CHECK(covered >= 27);
}

}  // namespace seqpoint::selector
