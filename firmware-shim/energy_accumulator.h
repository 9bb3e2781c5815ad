// Turns successive raw readings of a hardware energy counter into a monotonic joule total that
// survives counter wrap and counter resets.
//
// Policy (common/counter_wrap.h), for a counter `bits` wide counting `joules_per_count`:
//  - The first reading only sets the baseline (total 0, kind kFirst).
//  - raw >= previous: delta = raw - previous (kIncreased).
//  - raw < previous and the forward distance modulo 2^bits, raw - previous + 2^bits, is at most
//    `max_wrap_fraction` of the range: the counter wrapped (kWrapped) and that distance is
//    the delta. The 32-bit accumulator of gpu_metrics_v1_0 (15.259 uJ units) wraps after
//    65536 J, every ~3.6 min at 300 W, so reading at every iteration boundary sees small
//    forward distances.
//  - Otherwise the counter was reset (driver reload, GPU reset, device replaced): the energy
//    used between the last reading and the reset is unknowable, so the interval reports no
//    delta (kReset) and the new reading is the baseline. The total never goes back and never
//    counts energy it cannot account for. A 64-bit counter in 15.259 uJ units cannot wrap in
//    practice (2.8e14 J), so for it every decrease is a reset.
//  - A missing reading (device unavailable) is simply not fed in: the next reading's delta
//    spans the gap, which is right for a counter that kept running.
// Not thread-safe: one owner (the device's reader) updates it.
#pragma once

#include <cstdint>
#include <optional>

#include "common/counter_wrap.h"

namespace seqpoint::firmware {

class EnergyAccumulator {
 public:
  enum class Kind { kFirst, kIncreased, kWrapped, kReset };

  struct Update {
    Kind kind;
    std::optional<double> delta_joules;  // absent for kFirst and kReset
  };

  EnergyAccumulator(unsigned bits, double joules_per_count, double max_wrap_fraction = 0.5);

  Update Add(uint64_t raw);

  double total_joules() const { return total_joules_; }
  uint64_t wraps() const { return wraps_; }
  uint64_t resets() const { return resets_; }
  bool has_baseline() const { return counter_.primed(); }

 private:
  unsigned bits_;
  double joules_per_count_;
  uint64_t mask_;
  CounterUnwrapper counter_;  // the rule itself: common/counter_wrap.h
  double total_joules_ = 0.0;
  uint64_t wraps_ = 0;
  uint64_t resets_ = 0;
};

}  // namespace seqpoint::firmware
