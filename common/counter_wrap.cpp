#include "common/counter_wrap.h"

#include <algorithm>

namespace seqpoint {

CounterUnwrapper::CounterUnwrapper(uint64_t max_value, double max_wrap_fraction)
    : max_(max_value) {
  const double fraction = std::clamp(max_wrap_fraction, 0.0, 1.0);
  max_wrap_distance_ = max_ == 0      ? 0
                       : fraction >= 1 ? max_
                                       : static_cast<uint64_t>(static_cast<double>(max_) * fraction);
}

CounterUnwrapper::Step CounterUnwrapper::Update(uint64_t raw) {
  if (!primed_) {
    primed_ = true;
    last_ = raw;
    return {Kind::kFirst, 0};
  }
  const uint64_t prev = last_;
  last_ = raw;
  if (raw >= prev) return {Kind::kIncreased, raw - prev};
  if (max_ != 0 && prev <= max_ && raw <= max_) {
    // Forward distance modulo the range (max_ + 1), without overflow for max_ = 2^64 - 1.
    const uint64_t forward = (max_ - prev) + raw + 1;
    if (forward <= max_wrap_distance_) return {Kind::kWrapped, forward};
  }
  return {Kind::kReset, 0};
}

}  // namespace seqpoint
