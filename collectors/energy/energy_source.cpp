#include "collectors/energy/energy_source.h"

namespace seqpoint::collectors {

Result<uint64_t> WrappingCounter::Update(uint64_t raw) {
  if (!primed_) {
    primed_ = true;
    last_ = raw;
    return uint64_t{0};
  }
  const uint64_t prev = last_;
  last_ = raw;
  if (raw >= prev) return raw - prev;
  // Backwards: a wrap when the counter has a range and the new value lies within it
  // (drivers/powercap/intel_rapl_common.c counts 0..max_energy_range_uj).
  if (max_ != 0 && prev <= max_ && raw <= max_) return (max_ - prev) + raw + 1;
  return Unavailable("energy counter went backwards from " + std::to_string(prev) + " to " +
                     std::to_string(raw) + " (driver reload or device reset); re-based");
}

}  // namespace seqpoint::collectors
