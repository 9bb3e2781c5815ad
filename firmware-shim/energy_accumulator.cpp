#include "firmware-shim/energy_accumulator.h"

#include <algorithm>

namespace seqpoint::firmware {

EnergyAccumulator::EnergyAccumulator(unsigned bits, double joules_per_count,
                                     double max_wrap_fraction)
    : bits_(std::clamp(bits, 1u, 64u)), joules_per_count_(joules_per_count) {
  mask_ = bits_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits_) - 1;
  const double fraction = std::clamp(max_wrap_fraction, 0.0, 1.0);
  // A 64-bit counter in any realistic unit never wraps between two readings: treat every
  // decrease as a reset rather than claim 1.8e19 counts happened.
  max_wrap_distance_ =
      bits_ >= 64 ? 0 : static_cast<uint64_t>(static_cast<double>(mask_) * fraction);
}

EnergyAccumulator::Update EnergyAccumulator::Add(uint64_t raw) {
  raw &= mask_;
  if (!last_) {
    last_ = raw;
    return {Kind::kFirst, std::nullopt};
  }
  const uint64_t prev = *last_;
  last_ = raw;
  if (raw >= prev) {
    const double d = static_cast<double>(raw - prev) * joules_per_count_;
    total_joules_ += d;
    return {Kind::kIncreased, d};
  }
  // Forward distance modulo 2^bits (the mask keeps it in range for bits < 64).
  const uint64_t forward = (raw - prev) & mask_;
  if (forward <= max_wrap_distance_) {
    const double d = static_cast<double>(forward) * joules_per_count_;
    total_joules_ += d;
    ++wraps_;
    return {Kind::kWrapped, d};
  }
  ++resets_;
  return {Kind::kReset, std::nullopt};
}

}  // namespace seqpoint::firmware
