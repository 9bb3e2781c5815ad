// Time strata, drift detection and the stratified estimators on runs with warm-up, a mid-run
// slowdown and the faults a live agent meets (docs/estimators.md). Real recorded PyTorch runs
// go through the same code in tests/cli_test.cpp (`seqpoint evaluate --online`).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "selector/online_selector.h"
#include "selector/page_hinkley.h"
#include "selector/stratified_projection.h"
#include "selector/test_runs.h"
#include "selector/time_strata.h"

namespace seqpoint::selector {
namespace {

// A run with a warm-up (the first `warmup` iterations `warm_factor` slower, fading out) and,
// from `slow_at` on, iterations `slow_factor` slower in time while their work (the "counter",
// e.g. CPU time) stays as it was: a process sharing the CPU.
struct DriftRun {
  testing::Run run;
  std::vector<double> work;
};
DriftRun MakeDriftRun(size_t n, uint64_t seed, size_t warmup, double warm_factor, size_t slow_at,
                      double slow_factor) {
  DriftRun d;
  d.run = testing::MakeRun(n, seed, 0.05);
  d.work = d.run.time;
  d.run.total = 0;
  for (size_t i = 0; i < n; ++i) {
    double f = 1;
    if (i < warmup) f *= 1 + (warm_factor - 1) * (1 - static_cast<double>(i) / static_cast<double>(warmup));
    if (i >= slow_at) f *= slow_factor;
    d.run.time[i] *= f;
    d.run.total += d.run.time[i];
  }
  return d;
}

struct Online {
  OnlineSelector sel;
  std::vector<StrataSample> time_samples, work_samples;
};

Online RunOnline(const DriftRun& d, uint32_t per_doubling = 16) {
  OnlineOptions o;
  o.per_doubling = per_doubling;
  o.warmup = 0;
  Online out{*OnlineSelector::Create(o), {}, {}};
  const testing::Run& r = d.run;
  for (size_t i = 0; i < r.seq_len.size(); ++i) {
    Decision dec = out.sel.OnIteration(i, r.seq_len[i], r.batch[i], 0);
    out.sel.OnTime(i, r.seq_len[i], r.batch[i], r.time[i]);
    if (dec.measure) {
      const double cost = CostProxy(r.seq_len[i], r.batch[i]);
      out.time_samples.push_back({i, r.seq_len[i], cost, r.time[i], r.time[i]});
      out.work_samples.push_back({i, r.seq_len[i], cost, r.time[i], d.work[i]});
    }
  }
  return out;
}

double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

}  // namespace

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

const TimeChange* FirstSlower(const TimeStrata& t) {
  for (const TimeChange& c : t.changes()) {
    if (c.direction == 1) return &c;
  }
  return nullptr;
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
  CHECK(c.ordinal > 2500);
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

TEST_CASE("faults: a run that ends in its warm-up, one SL, a clock step, iterations out of order") {
  SUBCASE("ends during the warm-up: provisional strata, a projection all the same") {
    DriftRun d = MakeDriftRun(40, 2, 100, 1.5, SIZE_MAX, 1);
    Online o = RunOnline(d);
    CHECK_FALSE(o.sel.strata().warmup_settled());
    auto p = ProjectStratified(o.sel.strata(), o.sel.Current(), o.time_samples, Auxiliary::kCost);
    REQUIRE(p.ok());
    CHECK(p->whole.low <= d.run.total);
    CHECK(p->whole.high >= d.run.total);
  }
  SUBCASE("a single SL") {
    DriftRun d = MakeDriftRun(3000, 2, 50, 1.5, SIZE_MAX, 1);
    std::fill(d.run.seq_len.begin(), d.run.seq_len.end(), 32u);
    Online o = RunOnline(d);
    auto p = ProjectStratified(o.sel.strata(), o.sel.Current(), o.work_samples, Auxiliary::kTime);
    REQUIRE(p.ok());
    CHECK(std::fabs(p->whole.total - Sum(d.work)) / Sum(d.work) < 0.03);
  }
  SUBCASE("a clock step: one absurd time and one negative are no change and no crash") {
    DriftRun d = MakeDriftRun(3000, 2, 0, 1, SIZE_MAX, 1);
    d.run.time[1500] = 1e15;
    d.run.time[1600] = -5;
    Online o = RunOnline(d);
    CHECK(o.sel.strata().changes().empty());
    CHECK(o.sel.strata().observed() == 2999);
  }
  SUBCASE("iterations out of order (several threads): the same warm-up and strata") {
    DriftRun d = MakeDriftRun(3000, 2, 100, 1.6, 2000, 2.0);
    TimeStrata in_order, shuffled;
    std::mt19937_64 rng(1);
    std::vector<size_t> order(d.run.time.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (size_t b = 0; b + 4 <= order.size(); b += 4) std::shuffle(order.begin() + b, order.begin() + b + 4, rng);
    for (size_t i = 0; i < order.size(); ++i) {
      const size_t a = i, s = order[i];
      in_order.Observe(a, d.run.seq_len[a], CostProxy(d.run.seq_len[a], 64), d.run.time[a]);
      shuffled.Observe(s, d.run.seq_len[s], CostProxy(d.run.seq_len[s], 64), d.run.time[s]);
    }
    CHECK(shuffled.warmup_end() == in_order.warmup_end());
    const TimeChange* a = FirstSlower(in_order);
    const TimeChange* b = FirstSlower(shuffled);
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    CHECK(a->ordinal > 2000);
    CHECK(b->ordinal > 2000);
    CHECK(b->ordinal == doctest::Approx(static_cast<double>(a->ordinal)).epsilon(0.01));
  }
}

TEST_CASE("memory: bounded over 10^7 iterations, measurements still spread") {
  OnlineOptions o;
  o.per_doubling = 16;
  auto sel = *OnlineSelector::Create(o);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<uint32_t> sl(8, 120);
  std::normal_distribution<double> z(0, 0.03);
  for (uint64_t i = 0; i < 10'000'000; ++i) {
    const uint32_t l = sl(rng);
    sel.OnIteration(i, l, 64, 0);
    if (i % 16 == 0) sel.OnTime(i, l, 64, (2e5 + 1e3 * l * 64) * (1 + z(rng)));
  }
  CHECK(sel.MemoryBytes() < 8u << 20);
  size_t last_half = 0;
  for (const auto& s : sel.samples()) last_half += s.iter >= 5'000'000;
  CHECK(last_half >= 8);
}

}  // namespace seqpoint::selector
