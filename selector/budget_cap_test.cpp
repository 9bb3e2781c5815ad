// The cached budget cap must be the formula's value at every t: the selector's decisions, and
// with them every projection, depend on it.
#include "selector/budget_cap.h"

#include <doctest/doctest.h>

#include <cmath>

namespace seqpoint::selector {
namespace {

// Every t in [0, n), with the bonus raised now and then as changes of cost would raise it.
void CheckEveryT(const BudgetCapTerms& terms, uint64_t n) {
  BudgetCap cached(terms);
  const BudgetCap fresh(terms);
  uint64_t bonus = 0;
  for (uint64_t t = 0; t < n; ++t) {
    if (t % 100'003 == 99'999) bonus += 8;
    if (cached.At(t, bonus) != fresh.Exact(t, bonus)) {
      FAIL("cap differs at t = " << t << ": cached " << cached.At(t, bonus) << ", formula "
                                 << fresh.Exact(t, bonus));
    }
  }
}

}  // namespace

TEST_CASE("budget cap: the cached cap is the formula's at every iteration") {
  SUBCASE("per doubling (seqpointd's default), with the count cap") {
    CheckEveryT({.count = 4096, .per_doubling = 16, .window = 64}, 2'000'000);
  }
  SUBCASE("per doubling, odd window") { CheckEveryT({.per_doubling = 5, .window = 7}, 1'000'000); }
  SUBCASE("a fraction") { CheckEveryT({.fraction = 1.0 / 200}, 1'000'000); }
  SUBCASE("a paced count") { CheckEveryT({.count = 100, .pacing = 1000}, 1'000'000); }
  SUBCASE("a count alone never steps") {
    BudgetCap cap({.count = 30});
    CHECK(cap.At(0, 0) == 30);
    CHECK(cap.At(123'456'789, 0) == 30);
    CHECK(cap.At(uint64_t{1} << 62, 0) == 30);
  }
  SUBCASE("all of them") {
    CheckEveryT({.count = 300, .pacing = 5000, .per_doubling = 16, .window = 64, .fraction = 0.01},
                1'000'000);
  }
}

TEST_CASE("budget cap: the formula of docs/estimators.md") {
  const BudgetCap cap({.per_doubling = 16, .window = 64});
  CHECK(cap.Exact(0, 0) == 0);
  CHECK(cap.Exact(32, 0) == 8);   // k * t / W inside the first window
  CHECK(cap.Exact(64, 0) == 16);  // k * (1 + log2(t / W)) after it
  CHECK(cap.Exact(128, 0) == 32);
  CHECK(cap.Exact(64 << 20, 0) == 16 * 21);        // 16 more per doubling
  CHECK(cap.Exact(64 << 20, 24) == 16 * 21 + 24);  // plus the bonus for changes found
  const BudgetCap none({});
  CHECK(none.Exact(1000, 0) == UINT64_MAX);
}

}  // namespace seqpoint::selector
