#include "firmware-shim/energy_accumulator.h"

#include <algorithm>

namespace seqpoint::firmware {

namespace {

uint64_t MaskOf(unsigned bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

}  // namespace

// A 64-bit counter in any realistic unit never wraps between two readings: every decrease of
// it is a reset rather than 1.8e19 counts (max_value 0 in CounterUnwrapper).
EnergyAccumulator::EnergyAccumulator(unsigned bits, double joules_per_count,
                                     double max_wrap_fraction)
    : bits_(std::clamp(bits, 1u, 64u)),
      joules_per_count_(joules_per_count),
      mask_(MaskOf(bits_)),
      counter_(bits_ >= 64 ? 0 : mask_, max_wrap_fraction) {}

EnergyAccumulator::Update EnergyAccumulator::Add(uint64_t raw) {
  const CounterUnwrapper::Step step = counter_.Update(raw & mask_);
  switch (step.kind) {
    case CounterUnwrapper::Kind::kFirst:
      return {Kind::kFirst, std::nullopt};
    case CounterUnwrapper::Kind::kReset:
      ++resets_;
      return {Kind::kReset, std::nullopt};
    case CounterUnwrapper::Kind::kWrapped:
      ++wraps_;
      break;
    case CounterUnwrapper::Kind::kIncreased:
      break;
  }
  const double d = static_cast<double>(step.delta) * joules_per_count_;
  total_joules_ += d;
  return {step.kind == CounterUnwrapper::Kind::kWrapped ? Kind::kWrapped : Kind::kIncreased, d};
}

}  // namespace seqpoint::firmware
