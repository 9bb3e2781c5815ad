// SlowRankTest on constructed steps: the CUSUM threshold against its in-control run length, a
// slow rank found and a healthy one not, SL matching (a long-sequence rank is never tested
// against shorter peers), one stall not enough, and the alarm clearing after recovery.
#include "agent/fleet/slow_rank.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

using namespace seqpoint::daemon::fleet;

namespace {

// Four ranks at the same tokens, compute 100 ms x exp(noise), rank `slow` x factor from step
// `from` on.
std::vector<RankCompute> Step(std::mt19937& rng, double sigma, int slow, double factor, bool slowed,
                              uint64_t tokens = 512) {
  std::normal_distribution<double> noise(0, sigma);
  std::vector<RankCompute> r;
  for (int i = 0; i < 4; ++i) {
    double c = 100e6 * std::exp(noise(rng));
    if (i == slow && slowed) c *= factor;
    r.push_back({i, tokens, static_cast<uint64_t>(c)});
  }
  return r;
}

}  // namespace

TEST_CASE("fleet slow rank: the CUSUM threshold gives the in-control run length asked for") {
  // Siegmund's approximation at k = 0.5: h = 4 gives about 336 steps, h = 5 about 930 (the
  // textbook's table: 336, 930).
  CHECK(CusumThreshold(0.5, 336) == doctest::Approx(4.0).epsilon(0.02));
  CHECK(CusumThreshold(0.5, 930) == doctest::Approx(5.0).epsilon(0.02));
  // More steps between false alarms: a higher threshold.
  CHECK(CusumThreshold(0.5, 1e6) > CusumThreshold(0.5, 1e4));
}

TEST_CASE("fleet slow rank: a 10% slow rank is found within tens of steps, the healthy never") {
  std::mt19937 rng(7);
  SlowRankTest t;
  const double sigma = 0.03;  // 3% per-step noise in compute
  uint64_t raised_at = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    for (int32_t r : t.Step(i, Step(rng, sigma, 2, 1.10, i >= 1000))) {
      CHECK(r == 2);
      if (raised_at == 0) raised_at = i;
    }
  }
  REQUIRE(raised_at >= 1000);
  MESSAGE("found after " << raised_at - 1000 << " steps");
  CHECK(raised_at - 1000 < 60);
  CHECK(t.ranks().at(2).slow);
  CHECK(t.ranks().at(2).ratio == doctest::Approx(1.10).epsilon(0.03));
  for (int r : {0, 1, 3}) CHECK(t.ranks().at(r).alarms == 0);
  CHECK(t.ranks().at(2).sigma == doctest::Approx(sigma * std::sqrt(4.0 / 3)).epsilon(0.3));
}

TEST_CASE("fleet slow rank: no alarm on equal ranks over many steps") {
  std::mt19937 rng(11);
  SlowRankTest t;
  for (uint64_t i = 0; i < 20000; ++i) CHECK(t.Step(i, Step(rng, 0.05, -1, 1, false)).empty());
}

TEST_CASE("fleet slow rank: a rank fed longer sequences is not compared, so never slow") {
  std::mt19937 rng(3);
  SlowRankTest t;
  for (uint64_t i = 0; i < 500; ++i) {
    auto r = Step(rng, 0.03, 1, 1.9, true);
    r[1].tokens = 1024;  // twice the SL: 1.9x the compute, fewer per token than its peers
    CHECK(t.Step(i, r).empty());
  }
  CHECK(t.ranks().count(1) == 0);
  CHECK(t.ranks().at(0).tested == 500);
  // Within the tolerance (3% more tokens), compute per token is compared.
  for (uint64_t i = 500; i < 1000; ++i) {
    auto r = Step(rng, 0.03, 1, 1.25, true);
    r[1].tokens = 527;
    t.Step(i, r);
  }
  CHECK(t.ranks().at(1).slow);
}

TEST_CASE("fleet slow rank: one stall does not raise the alarm, recovery clears it") {
  SlowRankTest t;
  std::mt19937 rng(5);
  for (uint64_t i = 0; i < 100; ++i) t.Step(i, Step(rng, 0.01, -1, 1, false));
  auto r = Step(rng, 0.01, 3, 5.0, true);  // one step 5x slow
  CHECK(t.Step(100, r).empty());
  for (uint64_t i = 101; i < 200; ++i) CHECK(t.Step(i, Step(rng, 0.01, -1, 1, false)).empty());
  // Slow for 100 steps, then recovered: the alarm rises, then clears.
  bool raised = false;
  for (uint64_t i = 200; i < 300; ++i) raised |= !t.Step(i, Step(rng, 0.01, 3, 1.2, true)).empty();
  CHECK(raised);
  CHECK(t.ranks().at(3).slow);
  for (uint64_t i = 300; i < 500; ++i) t.Step(i, Step(rng, 0.01, -1, 1, false));
  CHECK_FALSE(t.ranks().at(3).slow);
  CHECK(t.ranks().at(3).alarms == 1);
}

TEST_CASE("fleet slow rank: unmeasured ranks and lone ranks are skipped") {
  SlowRankTest t;
  CHECK(t.Step(0, {{0, 512, 100}, {1, 512, 0}}).empty());
  CHECK(t.ranks().empty());
  CHECK(t.Step(1, {{0, 512, 100}}).empty());
  CHECK(t.ranks().empty());
}

TEST_CASE("fleet slow rank: the detection floor rises with the noise and predicts detection") {
  // The delay at drift 0 and its monotony in the mean.
  const double k = 0.5, h = CusumThreshold(k, 1e6);
  CHECK(CusumDelay(k, k, h, 3) == doctest::Approx((h + 1.166) * (h + 1.166)));
  CHECK(CusumDelay(2 * k, k, h, 3) < CusumDelay(1.5 * k, k, h, 3));
  CHECK(CusumDelay(0, k, h, 3) > 1e6 * 0.5);  // in control: about the false-alarm spacing
  // More noise: a higher floor; a longer horizon: a lower one.
  CHECK(DetectionFloor(0.05, 1, CusumThreshold(1, 1e6), 3, 100) >
        DetectionFloor(0.02, 2.4, CusumThreshold(2.4, 1e6), 3, 100));
  CHECK(DetectionFloor(0.05, 1, h, 3, 400) < DetectionFloor(0.05, 1, h, 3, 100));
  // On constructed steps of known noise: the floor each rank shows before a slowdown predicts
  // whether the test finds it within 100 steps, away from the floor (a slowdown at least 1.5x the
  // floor's, or at most 2/3 of it: near the floor either answer comes).
  int cases = 0, agree = 0;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    for (double factor : {1.015, 1.03, 1.06, 1.12, 1.25}) {
      std::mt19937 rng(seed);
      SlowRankTest t;
      double floor = 0;
      uint64_t found = 0;
      for (uint64_t i = 0; i < 400; ++i) {
        if (i == 300) floor = t.ranks().at(1).floor;
        for (int32_t r : t.Step(i, Step(rng, 0.04, 1, factor, i >= 300))) {
          if (r == 1 && found == 0) found = i - 300 + 1;
        }
      }
      REQUIRE(floor > 1);
      if (factor - 1 < 1.5 * (floor - 1) && 1.5 * (factor - 1) > floor - 1) continue;
      ++cases;
      agree += (factor >= floor) == (found > 0);
    }
  }
  MESSAGE("away from the floor, predicted " << agree << " of " << cases);
  CHECK(cases >= 12);
  CHECK(agree >= cases - 1);
}
