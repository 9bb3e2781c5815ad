#include "selector/budget_cap.h"

#include <algorithm>
#include <cmath>

namespace seqpoint::selector {

uint64_t BudgetCap::Exact(uint64_t iterations, uint64_t bonus) const {
  const double t = static_cast<double>(iterations);
  uint64_t cap = UINT64_MAX;
  if (terms_.count > 0) {
    // A count budget is released over the run, B * t / (t + pacing): half by t = pacing, 90%
    // by t = 9 * pacing. The run's length is unknown, and spending everything in the first
    // iterations would leave the projection blind to any drift in iteration cost later on.
    const double b = static_cast<double>(terms_.count);
    cap = terms_.pacing == 0 ? terms_.count
                             : static_cast<uint64_t>(std::floor(
                                   b * t / (t + static_cast<double>(terms_.pacing)) + 1e-9));
  }
  if (terms_.per_doubling > 0) {
    const double w = static_cast<double>(std::max<uint64_t>(1, terms_.window));
    const double k = static_cast<double>(terms_.per_doubling);
    const double pace = t < w ? k * t / w : k * (1 + std::log2(t / w));
    cap = std::min(cap, static_cast<uint64_t>(std::floor(pace + 1e-9)) + bonus);
  }
  if (terms_.fraction > 0) {
    cap = std::min(cap, static_cast<uint64_t>(std::floor(terms_.fraction * t + 1e-9)));
  }
  return cap;
}

uint64_t BudgetCap::Step(uint64_t t, uint64_t bonus) {
  bonus_ = bonus;
  value_ = Exact(t, bonus);
  from_ = t;
  // The next t at which the cap steps: gallop while it holds, then bisect. The terms are
  // non-decreasing in t, so the cap holds on the whole stretch in between. Stops at 2^62
  // iterations (a cap that never steps is evaluated again there).
  constexpr uint64_t kHorizon = uint64_t{1} << 62;
  uint64_t same = t, step = 1;
  uint64_t differs = 0;
  while (same < kHorizon) {
    const uint64_t probe = same + std::min(step, kHorizon - same);
    if (Exact(probe, bonus) != value_) {
      differs = probe;
      break;
    }
    same = probe;
    step *= 2;
  }
  if (differs == 0) {
    until_ = same + 1;
    return value_;
  }
  while (differs - same > 1) {
    const uint64_t mid = same + (differs - same) / 2;
    (Exact(mid, bonus) == value_ ? same : differs) = mid;
  }
  until_ = differs;
  return value_;
}

}  // namespace seqpoint::selector
