#include "selector/online_selector.h"

#include <doctest/doctest.h>

#include <cmath>

#include "selector/projection.h"
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
