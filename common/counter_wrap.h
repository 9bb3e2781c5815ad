// The one rule for turning successive readings of a hardware counter that wraps into
// increases, shared by the energy sources (RAPL, NVML: collectors/energy) and the amdgpu
// gpu_metrics accumulator (firmware-shim/energy_accumulator.h).
//
// The counter counts up from 0 to `max_value` and then wraps to 0 (range max_value + 1); a
// max_value of 0 means a 64-bit counter that never wraps in practice.
//  - The first reading sets the baseline (kFirst, delta 0).
//  - raw >= previous: kIncreased, delta = raw - previous.
//  - raw < previous, both within the range, and the forward distance (raw - previous modulo
//    the range) at most max_wrap_fraction of the range: kWrapped, delta = that distance.
//  - Otherwise the counter was reset (driver reload, device reset): kReset, no delta, and the
//    new reading is the baseline. What was used between the last reading and the reset is
//    unknowable; it is never invented.
// One read per wrap period at least is the caller's duty: two wraps between reads cannot be
// told from one. Not thread-safe.
#pragma once

#include <cstdint>

namespace seqpoint {

class CounterUnwrapper {
 public:
  enum class Kind { kFirst, kIncreased, kWrapped, kReset };
  struct Step {
    Kind kind;
    uint64_t delta;  // 0 for kFirst and kReset
  };

  explicit CounterUnwrapper(uint64_t max_value = 0, double max_wrap_fraction = 1.0);

  Step Update(uint64_t raw);
  void Reset() { primed_ = false; }
  bool primed() const { return primed_; }

 private:
  uint64_t max_;
  uint64_t max_wrap_distance_;
  uint64_t last_ = 0;
  bool primed_ = false;
};

}  // namespace seqpoint
