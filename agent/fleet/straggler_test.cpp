// Median, StragglerJoin and JudgeStep on constructed arrivals: the verdict's rank, lag and cause,
// the matching of arrivals to iterations, and the bounds on what waits.
#include "agent/fleet/straggler.h"

#include <doctest/doctest.h>

#include "agent/fleet/median.h"

using namespace seqpoint::daemon::fleet;

namespace {
constexpr uint64_t kMs = 1'000'000;
}

TEST_CASE("fleet median: odd, even, empty, and the caller's values left in order") {
  CHECK(Median({}) == 0);
  CHECK(Median({3}) == 3);
  CHECK(Median({5, 1, 3}) == 3);
  CHECK(Median({4, 1, 3, 2}) == doctest::Approx(2.5));  // the mean of the two middle values
  CHECK(Median({-2, 7, 7, 100}) == 7);                  // ties; one outlier moves nothing
  const std::vector<double> v = {9, 1, 5};
  CHECK(Median(v) == 5);
  CHECK(v == std::vector<double>{9, 1, 5});
}

TEST_CASE("fleet straggler: the last rank, by how much, and why") {
  StragglerOptions o;
  // Four ranks begin at 0; rank 2 arrives 30 ms after the others' 100 ms at the same tokens.
  std::vector<RankArrival> r = {{0, 512, 0, 100 * kMs},
                                {1, 512, 0, 101 * kMs},
                                {2, 512, 0, 131 * kMs},
                                {3, 512, 0, 99 * kMs}};
  StepVerdict v = JudgeStep(7, r, o);
  CHECK(v.iter == 7);
  CHECK(v.last_rank == 2);
  CHECK(v.lag_ns == 31 * kMs);
  CHECK(v.straggles);
  CHECK(v.cause == StragglerCause::kHardware);
  CHECK(v.lag_share == doctest::Approx(31.0 / 100));
  // The same rank with twice the tokens: data.
  r[2].tokens = 1024;
  CHECK(JudgeStep(7, r, o).cause == StragglerCause::kData);
  // Within the tolerance (4% more): still hardware.
  r[2].tokens = 532;
  CHECK(JudgeStep(7, r, o).cause == StragglerCause::kHardware);
  // 10% more tokens cannot explain a 31% lag: a slow rank that happened to get a longer batch.
  r[2].tokens = 563;
  CHECK(JudgeStep(7, r, o).cause == StragglerCause::kHardware);
  // 20% more tokens explain more than half of it: data.
  r[2].tokens = 615;
  CHECK(JudgeStep(7, r, o).cause == StragglerCause::kData);
  // A lag under 10% of the compute is noise: the last rank is named, not counted.
  r[2].arrival_ns = 105 * kMs;
  v = JudgeStep(7, r, o);
  CHECK(v.last_rank == 2);
  CHECK_FALSE(v.straggles);
  // One rank: no verdict.
  CHECK(JudgeStep(7, {r[0]}, o).last_rank == -1);
}

TEST_CASE(
    "fleet straggler join: arrivals matched to iterations, steps judged once every rank settled") {
  StragglerOptions o;
  o.settle_ns = 10 * kMs;
  StragglerJoin j(o);
  for (uint32_t pid = 100; pid < 103; ++pid) j.AddRank(pid, static_cast<int32_t>(pid - 100));
  // Step s runs [s*200, s*200+190] ms; rank 1 arrives 40 ms late in every step, and each rank
  // also enters two more collectives later in the step (DDP's later buckets) and one between
  // steps (not inside any iteration).
  for (uint64_t s = 0; s < 5; ++s) {
    const uint64_t b = s * 200 * kMs;
    for (uint32_t pid = 100; pid < 103; ++pid) {
      const uint64_t arrive = b + (pid == 101 ? 140 : 100) * kMs;
      j.OnArrival(pid, arrive + 20 * kMs);  // out of order: a later bucket's thread first
      j.OnArrival(pid, arrive);
      j.OnArrival(pid, arrive + 30 * kMs);
      j.OnArrival(pid, b + 195 * kMs);
      j.OnIteration(pid, s, 400, b + 1 * kMs, b + 190 * kMs);
    }
  }
  // The last step has not settled yet (it ended less than settle_ns ago).
  CHECK(j.Settle(4 * 200 * kMs + 195 * kMs).size() == 4);
  auto last = j.Settle(2000 * kMs);
  REQUIRE(last.size() == 1);
  CHECK(last[0].iter == 4);
  const StragglerCounts& c = j.counts();
  CHECK(c.steps == 5);
  CHECK(c.straggler_steps[1] == 5);
  CHECK(c.straggler_steps[0] == 0);
  CHECK(c.last_by_rank.at(1)[1] == 5);
  CHECK(c.lag_seconds[1] == doctest::Approx(5 * 0.040));
  CHECK(c.unmatched == 0);
  CHECK(c.incomplete == 0);
}

TEST_CASE(
    "fleet straggler join: a rank's missing iteration or arrival leaves the step out, counted") {
  StragglerOptions o;
  o.settle_ns = 0;
  StragglerJoin j(o);
  j.AddRank(1, 0);
  j.AddRank(2, 1);
  // Step 0: rank 1 (pid 2) has no collective entry. Step 1: pid 1's iteration is lost.
  // Step 2: both complete.
  j.OnArrival(1, 50 * kMs);
  j.OnIteration(1, 0, 10, 1 * kMs, 90 * kMs);
  j.OnIteration(2, 0, 10, 1 * kMs, 90 * kMs);
  j.OnArrival(2, 150 * kMs);
  j.OnIteration(2, 1, 10, 100 * kMs, 190 * kMs);
  for (uint32_t pid : {1u, 2u}) {
    j.OnArrival(pid, (pid == 1 ? 250 : 280) * kMs);
    j.OnIteration(pid, 2, 10, 200 * kMs, 290 * kMs);
  }
  auto v = j.Settle(1000 * kMs);
  REQUIRE(v.size() == 1);
  CHECK(v[0].iter == 2);
  CHECK(v[0].last_rank == 1);
  CHECK(j.counts().unmatched == 1);
  CHECK(j.counts().incomplete == 2);
  // A removed rank no longer holds steps up.
  j.RemoveRank(2);
  j.OnIteration(1, 3, 10, 300 * kMs, 390 * kMs);
  CHECK(j.Settle(2000 * kMs).empty());  // one rank: nothing to compare
  CHECK(j.ranks() == 1);
}

TEST_CASE("fleet straggler join: a job faster than the settle time loses no step") {
  // 2,000 steps of 1 ms with a 2 s settle time: each rank runs far more than kMaxPending
  // iterations before its first one settles. They used to be dropped (every step of a job faster
  // than 128 iterations a second lost); the oldest now settles early, its arrival already in.
  StragglerOptions o;
  StragglerJoin j(o);
  j.AddRank(1, 0);
  j.AddRank(2, 1);
  constexpr uint64_t kSteps = 2000;
  size_t judged = 0;
  for (uint64_t s = 0; s < kSteps; ++s) {
    const uint64_t b = s * kMs;
    for (uint32_t pid : {1u, 2u}) {
      j.OnArrival(pid, b + (pid == 2 ? 900'000 : 500'000));
      j.OnIteration(pid, s, 64, b + 1000, b + 990'000);
    }
    if (s % 100 == 99) judged += j.Settle(b + kMs).size();  // as the daemon settles, often
  }
  // Before the last iterations settled: all but about the last kMaxPending steps.
  CHECK(judged >= kSteps - StragglerJoin::kMaxPending - 1);
  judged += j.Settle(kSteps * kMs + o.settle_ns).size();
  CHECK(judged == kSteps);
  CHECK(j.counts().steps == kSteps);
  CHECK(j.counts().unmatched == 0);
  CHECK(j.counts().incomplete == 0);
  CHECK(j.counts().slow.at(1).tested == kSteps);  // every step compared by the sequential test
}
