#include "common/counter_wrap.h"

#include <doctest/doctest.h>

namespace seqpoint {

TEST_CASE("counter wrap: increases, a wrap within the range, a reset, a 64-bit counter") {
  CounterUnwrapper rapl(999);  // counts 0..999
  CHECK(rapl.Update(900).kind == CounterUnwrapper::Kind::kFirst);
  CHECK(rapl.Update(950).delta == 50);
  const auto w = rapl.Update(20);  // 950 -> 999 -> 0 -> 20
  CHECK(w.kind == CounterUnwrapper::Kind::kWrapped);
  CHECK(w.delta == 70);
  CHECK(rapl.Update(5000).kind == CounterUnwrapper::Kind::kIncreased);  // out of range: a jump
  CHECK(rapl.Update(10).kind == CounterUnwrapper::Kind::kReset);       // 5000 was no wrap value

  CounterUnwrapper half(999, 0.5);  // a forward distance over half the range is a reset
  half.Update(600);
  CHECK(half.Update(500).kind == CounterUnwrapper::Kind::kReset);  // 900 forward
  CHECK(half.Update(990).delta == 490);
  CHECK(half.Update(100).kind == CounterUnwrapper::Kind::kWrapped);  // 110 forward

  CounterUnwrapper wide;  // 64-bit: every decrease is a reset
  wide.Update(1'000'000);
  CHECK(wide.Update(5).kind == CounterUnwrapper::Kind::kReset);
  CHECK(wide.Update(7).delta == 2);
}

}  // namespace seqpoint
