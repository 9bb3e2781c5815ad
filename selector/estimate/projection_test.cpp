#include "selector/estimate/projection.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace seqpoint::selector;

namespace {
Selection TwoPoints() {
  Selection s;
  s.iterations = 300;
  SeqPoint a;
  a.iter = 1;
  a.iters = {1, 2};
  a.weight = 100;
  a.mean_cost = 10;
  SeqPoint b;
  b.iter = 3;
  b.iters = {3, 4};
  b.weight = 200;
  b.mean_cost = 50;
  s.points = {a, b};
  return s;
}
}  // namespace

TEST_CASE("projection: exact on noiseless linear data, adjusting for the sampled SL's gap") {
  // value = 5 + 2*cost; point a sampled at costs 8 and 9 while its bin mean is 10.
  std::vector<std::vector<Observation>> obs = {{{8, 21}, {9, 23}}, {{50, 105}, {52, 109}}};
  auto m = ProjectMetric(TwoPoints(), obs);
  REQUIRE(m.ok());
  CHECK(m->total == doctest::Approx(100 * 25 + 200 * 105));
  // Only the read resolution (1/12 unit^2 per sample) widens it.
  CHECK(m->high - m->low < 2e-2 * m->total);
}

TEST_CASE("projection: a point without this metric takes the fitted line") {
  std::vector<std::vector<Observation>> obs = {{}, {{40, 85}, {60, 125}}};
  auto m = ProjectMetric(TwoPoints(), obs);
  REQUIRE(m.ok());
  CHECK(m->total == doctest::Approx(100 * 25 + 200 * 105));
  CHECK(m->points == 1);
}

TEST_CASE("projection: no measurement at all is an error, noise widens the interval") {
  CHECK(!ProjectMetric(TwoPoints(), {{}, {}}).ok());
  std::vector<std::vector<Observation>> noisy = {{{10, 24}, {10, 26}}, {{50, 100}, {50, 110}}};
  auto m = ProjectMetric(TwoPoints(), noisy);
  REQUIRE(m.ok());
  CHECK(m->low < m->total);
  CHECK(m->high > m->total);
  CHECK(m->dof == 2);
}

TEST_CASE("projection: identical samples still get an interval from the points' spread") {
  // A counter that read 0 on every repeat of one point but not elsewhere.
  std::vector<std::vector<Observation>> obs = {{{10, 0}, {10, 0}}, {{50, 40}, {52, 47}}};
  auto m = ProjectMetric(TwoPoints(), obs);
  REQUIRE(m.ok());
  CHECK(m->high - m->low > 0.05 * m->total);
}

TEST_CASE("projection: speedup is the ratio of totals with a combined interval") {
  MetricProjection a{200, 190, 210, 4, 2, 10};
  MetricProjection b{100, 97, 103, 4, 2, 10};
  auto s = ProjectSpeedup(a, b);
  CHECK(s.speedup == doctest::Approx(2.0));
  CHECK(s.low < 2.0);
  CHECK(s.high > 2.0);
  CHECK(TQuantile95(1) > TQuantile95(10));
  CHECK(TQuantile95(1e6) == doctest::Approx(1.96));
}
