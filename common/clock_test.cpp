#include "common/clock.h"

#include <doctest/doctest.h>

namespace seqpoint {

TEST_CASE("clock: the system clock by default, a fake one while a test holds it") {
  const int64_t before = WallNs();
  CHECK(before > 1'600'000'000'000'000'000);  // after 2020
  {
    FakeClock fake(42'000'000'000, 7);
    CHECK(WallNs() == 42'000'000'000);
    fake.Advance(3'000'000'000);
    CHECK(WallNs() == 45'000'000'000);
    CHECK(MonotonicNs() == 3'000'000'007);
  }
  CHECK(WallNs() >= before);  // back to the system's
}

}  // namespace seqpoint
