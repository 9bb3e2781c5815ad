#include "selector/offline_selector.h"

#include <doctest/doctest.h>

#include <set>

#include "selector/estimate/projection.h"
#include "selector/test_runs.h"

using namespace seqpoint::selector;
using seqpoint::selector::testing::MakeRun;

namespace {

Selection SelectOffline(const testing::Run& r, const OfflineOptions& o) {
  SlHistogram h;
  for (size_t i = 0; i < r.seq_len.size(); ++i)
    h.Add(r.seq_len[i], CostProxy(r.seq_len[i], r.batch[i]), 0, i >= o.warmup);
  auto plan = PlanOffline(h, o);
  REQUIRE(plan.ok());
  OccurrencePicker picker(*plan);
  for (size_t i = 0; i < r.seq_len.size(); ++i) picker.Observe(i, i, r.seq_len[i]);
  auto sel = picker.Finish();
  REQUIRE(sel.ok());
  return *sel;
}

MetricProjection Project(const testing::Run& r, const Selection& s) {
  auto m = ProjectMetric(s, testing::ObservationsOf(r, s));
  REQUIRE(m.ok());
  return *m;
}

}  // namespace

TEST_CASE("offline: weights sum to the run, budget is never exceeded, iterations are unique") {
  auto r = MakeRun(20000, 1);
  for (uint64_t budget : {1ull, 2ull, 7ull, 100ull, 1000ull}) {
    OfflineOptions o;
    o.budget = budget;
    Selection s = SelectOffline(r, o);
    uint64_t w = 0;
    std::set<uint64_t> seen;
    for (const auto& p : s.points) {
      w += p.weight;
      CHECK(p.iters.front() == p.iter);
      CHECK(r.seq_len[p.iter] == p.seq_len);
      for (uint64_t it : p.iters) {
        CHECK(seen.insert(it).second);
        CHECK(it >= o.warmup);
        CHECK(r.seq_len[it] >= p.bin_lo);
        CHECK(r.seq_len[it] <= p.bin_hi);
      }
    }
    CHECK(w == r.seq_len.size());
    CHECK(s.measured() <= budget);
    CHECK(s.measured() == budget);  // this run has enough of every SL to spend it all
  }
}

TEST_CASE("offline: repeat samples of a point are spread over the run") {
  auto r = MakeRun(20000, 2);
  OfflineOptions o;
  o.budget = 100;
  Selection s = SelectOffline(r, o);
  for (const auto& p : s.points) {
    if (p.iters.size() < 4) continue;
    auto [mn, mx] = std::minmax_element(p.iters.begin(), p.iters.end());
    CHECK(*mx - *mn > 20000 / 4);
  }
}

TEST_CASE("offline: projection of a noisy run is within 3 sigma of the sampling noise") {
  auto r = MakeRun(20000, 3, 0.05);
  OfflineOptions o;
  o.budget = 100;  // 1/200 of the run
  Selection s = SelectOffline(r, o);
  auto m = Project(r, s);
  // 100 samples of 5% noise: one sigma of the mean is ~0.5%.
  double err = std::fabs(m.total - r.total) / r.total;
  CHECK(err < 0.015);
  CHECK(m.low < m.total);
  CHECK(m.high > m.total);
}

TEST_CASE("offline: the 95% interval covers the truth in most of many runs") {
  int covered = 0, runs = 60;
  for (int k = 0; k < runs; ++k) {
    auto r = MakeRun(5000, 100 + k, 0.08, 3.0);
    OfflineOptions o;
    o.budget = 40;
    auto m = Project(r, SelectOffline(r, o));
    covered += (m.low <= r.total && r.total <= m.high) ? 1 : 0;
  }
  CHECK(covered >= runs * 85 / 100);
}

TEST_CASE("offline: target-error mode picks enough bins for a quadratic cost") {
  auto r = MakeRun(20000, 4, 0.0, 50.0);
  OfflineOptions o;
  o.target_error_pct = 0.5;
  o.repeats = 1;
  Selection s = SelectOffline(r, o);
  CHECK(s.proxy_error_pct <= 0.5);
  CHECK(s.points.size() > 1);
  auto m = Project(r, s);
  CHECK(std::fabs(m.total - r.total) / r.total < 0.005);
}

TEST_CASE("offline: counter groups rotate across a point's samples") {
  auto r = MakeRun(5000, 5);
  OfflineOptions o;
  o.budget = 60;
  o.counter_groups = 3;
  Selection s = SelectOffline(r, o);
  for (const auto& p : s.points) {
    REQUIRE(p.groups.size() == p.iters.size());
    for (size_t j = 0; j < p.groups.size(); ++j) CHECK(p.groups[j] == j % 3);
  }
}

TEST_CASE("offline: a run shorter than the warm-up is an error that says so") {
  SlHistogram h;
  for (int i = 0; i < 5; ++i) h.Add(10, 10, 0, false);
  OfflineOptions o;
  o.budget = 3;
  auto plan = PlanOffline(h, o);
  REQUIRE(plan.ok());
  OccurrencePicker picker(*plan);
  for (int i = 0; i < 5; ++i) picker.Observe(i, i, 10);
  auto s = picker.Finish();
  CHECK(!s.ok());
  CHECK(s.status().message().find("warm-up") != std::string::npos);
  SlHistogram empty;
  CHECK(!PlanOffline(empty, o).ok());
}
