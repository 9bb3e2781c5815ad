#include "selector/online_selector.h"

#include <doctest/doctest.h>

#include <cmath>

#include "selector/estimate/projection.h"
#include "selector/test_runs.h"

using namespace seqpoint::selector;
using seqpoint::selector::testing::MakeRun;

namespace {

MetricProjection ProjectOnline(const testing::Run& r, OnlineSelector& sel) {
  Selection s = sel.Current();
  auto m = ProjectMetric(s, testing::ObservationsOf(r, s));
  REQUIRE(m.ok());
  return *m;
}

}  // namespace

TEST_CASE("online: never exceeds a fraction budget at any moment") {
  auto r = MakeRun(30000, 7);
  OnlineOptions o;
  o.budget_fraction = 1.0 / 200;
  auto sel = OnlineSelector::Create(o);
  REQUIRE(sel.ok());
  for (size_t i = 0; i < r.seq_len.size(); ++i) {
    sel->OnIteration(i, r.seq_len[i], r.batch[i], 0);
    REQUIRE(sel->measured() <= static_cast<uint64_t>(std::floor((i + 1) / 200.0 + 1e-9)));
  }
  CHECK(sel->measured() >= 30000 / 200 - 5);  // and it does spend it
}

TEST_CASE("online: never exceeds a count budget, weights sum to the run") {
  auto r = MakeRun(10000, 8);
  OnlineOptions o;
  o.budget_count = 40;
  auto sel = OnlineSelector::Create(o);
  REQUIRE(sel.ok());
  for (size_t i = 0; i < r.seq_len.size(); ++i) sel->OnIteration(i, r.seq_len[i], r.batch[i], 0);
  CHECK(sel->measured() <= 40);
  Selection s = sel->Current();
  uint64_t w = 0;
  for (const auto& p : s.points) w += p.weight;
  CHECK(w == 10000);
  CHECK(s.measured() == sel->measured());
}

TEST_CASE("online: accuracy close to offline on a noisy run") {
  auto r = MakeRun(20000, 9, 0.05, 2.0);
  OnlineOptions o;
  o.budget_fraction = 1.0 / 200;
  auto sel = OnlineSelector::Create(o);
  REQUIRE(sel.ok());
  for (size_t i = 0; i < r.seq_len.size(); ++i) sel->OnIteration(i, r.seq_len[i], r.batch[i], 0);
  auto m = ProjectOnline(r, *sel);
  CHECK(std::fabs(m.total - r.total) / r.total < 0.015);
}

TEST_CASE("online: drift to longer sequences re-bins and keeps earlier samples") {
  auto a = MakeRun(5000, 10, 0.03, 0.0, 40);
  auto b = MakeRun(5000, 11, 0.03, 0.0, 400);
  for (auto& sl : b.seq_len) sl += 100;  // the second half of the run is longer
  testing::Run r = a;
  r.seq_len.insert(r.seq_len.end(), b.seq_len.begin(), b.seq_len.end());
  r.batch.insert(r.batch.end(), b.batch.begin(), b.batch.end());
  r.time.insert(r.time.end(), b.time.begin(), b.time.end());
  r.total = a.total + b.total;
  OnlineOptions o;
  o.budget_fraction = 1.0 / 100;
  auto sel = OnlineSelector::Create(o);
  REQUIRE(sel.ok());
  for (size_t i = 0; i < r.seq_len.size(); ++i) sel->OnIteration(i, r.seq_len[i], r.batch[i], 0);
  Selection s = sel->Current();
  bool early = false, late = false;
  for (const auto& p : s.points)
    for (uint64_t it : p.iters) (it < 5000 ? early : late) = true;
  CHECK(early);
  CHECK(late);
  auto m = ProjectOnline(r, *sel);
  CHECK(std::fabs(m.total - r.total) / r.total < 0.03);
}

TEST_CASE("online: a count budget is paced over the run, and Current() changes no decision") {
  auto r = MakeRun(20000, 13);
  OnlineOptions o;
  o.budget_count = 100;
  o.pacing_iterations = 1000;
  auto a = OnlineSelector::Create(o);
  auto b = OnlineSelector::Create(o);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  for (size_t i = 0; i < r.seq_len.size(); ++i) {
    auto da = a->OnIteration(i, r.seq_len[i], r.batch[i], 0);
    if (i % 97 == 0) (void)a->Current();  // reading must not steer the selector
    auto db = b->OnIteration(i, r.seq_len[i], r.batch[i], 0);
    REQUIRE(da.measure == db.measure);
    if (i == 999) CHECK(a->measured() <= 50);  // half the budget by t = pacing
  }
  Selection s = a->Current();
  uint64_t late = 0;
  for (const auto& p : s.points)
    for (uint64_t it : p.iters) late += it >= 10000 ? 1 : 0;
  CHECK(late >= 5);  // the second half of the run is measured too
  CHECK(a->measured() <= 100);
}

TEST_CASE("online: needs a budget, rotates counter groups") {
  CHECK(!OnlineSelector::Create(OnlineOptions{}).ok());
  OnlineOptions bad;
  bad.budget_fraction = 2;
  CHECK(!OnlineSelector::Create(bad).ok());
  auto r = MakeRun(5000, 12);
  OnlineOptions o;
  o.budget_count = 30;
  o.counter_groups = 2;
  auto sel = OnlineSelector::Create(o);
  REQUIRE(sel.ok());
  for (size_t i = 0; i < r.seq_len.size(); ++i) sel->OnIteration(i, r.seq_len[i], r.batch[i], 0);
  Selection s = sel->Current();
  bool saw1 = false;
  for (const auto& p : s.points) {
    REQUIRE(p.groups.size() == p.iters.size());
    for (auto g : p.groups) saw1 |= g == 1;
  }
  CHECK(saw1);
}

TEST_CASE("online: an iteration that cannot be measured is never chosen and meets no want") {
  auto r = MakeRun(4000, 11);
  OnlineOptions o;
  o.budget_count = 12;  // released at once: every iteration is a candidate until it is spent
  auto a = OnlineSelector::Create(o);
  auto b = OnlineSelector::Create(o);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  // b meets its first 500 iterations end-only: none chosen, the candidates counted as lost.
  for (size_t i = 0; i < 500; ++i) {
    Decision d = b->OnIteration(i, r.seq_len[i], r.batch[i], 0.0, /*can_measure=*/false);
    CHECK(!d.measure);
    if (i >= o.warmup) CHECK(b->WantsNext());  // the slots stay free for a measurable one
  }
  CHECK(b->measured() == 0);
  CHECK(b->unmeasurable() == 500);
  CHECK(b->missed() > 0);
  for (size_t i = 500; i < r.seq_len.size(); ++i) {
    (void)a->OnIteration(i, r.seq_len[i], r.batch[i], 0.0);
    (void)b->OnIteration(i, r.seq_len[i], r.batch[i], 0.0);
  }
  // The same wants were met later: the budget is spent whole, not shrunk by the lost ones.
  CHECK(b->measured() == 12);
  CHECK(b->measured() == a->measured());
  CHECK(!b->WantsNext());
}

TEST_CASE("online: with a paced budget the next iteration is wanted only at the pace's steps") {
  auto r = MakeRun(100000, 5);
  OnlineOptions o;
  o.per_doubling = 16;
  o.warmup = 0;
  o.hook_lead = 0;  // the slots themselves (seqpointd arms a little ahead of them)
  auto sel = OnlineSelector::Create(o);
  REQUIRE(sel.ok());
  uint64_t wanted = 0;
  for (size_t i = 0; i < r.seq_len.size(); ++i) {
    const bool want = sel->WantsNext();
    wanted += want;
    Decision d = sel->OnIteration(i, r.seq_len[i], r.batch[i], 0.0);
    if (d.measure) CHECK(want);  // never a choice the hooks were not armed for
  }
  INFO("wanted ", wanted, " of ", r.seq_len.size(), ", measured ", sel->measured());
  CHECK(sel->measured() > 16);
  CHECK(wanted < r.seq_len.size() / 10);
}

namespace {

// A run whose iteration time is its SL's cost with `noise` relative spread (deterministic).
double TimeOf(uint32_t seq_len, size_t i, double noise) {
  const double u = static_cast<double>((i * 2654435761u) % 1000) / 1000.0 - 0.5;  // [-0.5, 0.5)
  return 1000.0 * seq_len * (1 + 2 * noise * u);
}

uint64_t MeasuredWith(const testing::Run& r, double target, double noise, double cost = 0,
                      double max_overhead = 0) {
  OnlineOptions o;
  o.per_doubling = 16;
  o.warmup = 0;
  o.target_rel_error = target;
  o.max_overhead = max_overhead;
  auto sel = OnlineSelector::Create(o);
  REQUIRE(sel.ok());
  sel->set_measurement_cost(cost);
  double time = 0;
  for (size_t i = 0; i < r.seq_len.size(); ++i) {
    (void)sel->OnIteration(i, r.seq_len[i], r.batch[i], 0.0);
    const double t = TimeOf(r.seq_len[i], i, noise);
    sel->OnTime(i, r.seq_len[i], r.batch[i], t);
    time += t;
    // The overhead budget holds at each doubling window's end (its budget was set from the
    // mean iteration time so far: 5% for this run's spread and mix of SLs), but for the run's
    // first few (overhead_floor) and each stratum's first few (min_samples_per_stratum: the
    // warm-up, each window, each change).
    const uint64_t n = i + 1;
    if (max_overhead > 0 && n >= 128 && (n & (n - 1)) == 0) {
      const double strata = 2 + std::log2(static_cast<double>(n) / 64) +
                            static_cast<double>(sel->strata().changes().size());
      const double spared = o.overhead_floor + o.min_samples_per_stratum * strata;
      CHECK(static_cast<double>(sel->measured()) * cost <=
            1.05 * max_overhead * time + spared * cost);
    }
  }
  return sel->measured();
}

}  // namespace

TEST_CASE("online: a target error stops measuring a stretch once its time is that precise") {
  auto r = MakeRun(50000, 3);
  const uint64_t paced = MeasuredWith(r, 0, 0.01);
  const uint64_t steady = MeasuredWith(r, 0.02, 0.01);  // 1% spread within an SL: tight at once
  const uint64_t noisy = MeasuredWith(r, 0.02, 0.8);    // 80%: never that tight in a window
  INFO("paced ", paced, ", steady with a 2% target ", steady, ", noisy with it ", noisy);
  CHECK(steady < paced);  // 133 vs 169 when written: each doubling window still needs its own
  CHECK(noisy == paced);
}

TEST_CASE("online: an overhead budget caps the measured share by the measured cost") {
  auto r = MakeRun(50000, 3);
  const uint64_t free = MeasuredWith(r, 0, 0.01);
  // Each measured iteration costs 10 iterations' worth of time (SL 64's): at most 1% of the run.
  const uint64_t capped = MeasuredWith(r, 0, 0.01, 10 * 1000.0 * 64, 0.01);
  INFO("uncapped ", free, ", capped ", capped);
  CHECK(capped < free);
  CHECK(capped > 0);
}
