#include "collectors/energy/energy_source.h"

namespace seqpoint::collectors {

Result<uint64_t> WrappingCounter::Update(uint64_t raw) {
  const uint64_t prev = counter_.primed() ? last_ : raw;
  last_ = raw;
  // drivers/powercap/intel_rapl_common.c counts 0..max_energy_range_uj: any backward step
  // within that range is a wrap (common/counter_wrap.h).
  const CounterUnwrapper::Step step = counter_.Update(raw);
  if (step.kind != CounterUnwrapper::Kind::kReset) return step.delta;
  return Unavailable("energy counter went backwards from " + std::to_string(prev) + " to " +
                     std::to_string(raw) + " (driver reload or device reset); re-based");
}

}  // namespace seqpoint::collectors
