// Which windows NVML's total-energy counter can give the energy of.
//
// nvmlDeviceGetTotalEnergyConsumption (mJ since driver load) does not move continuously: the
// driver updates it in steps. On an H100 80GB HBM3 (driver 580.159.04) it moved every 100 ms
// (gaps 97-103 ms idle, 88-113 ms between on-time reads under load, ~7 J a step at 71 W), and one
// read cost 2.4-64 ms (bench/gpu/nvml_record.py; testdata/h100_energy_reads.csv). A window shorter
// than the update period reads 0 or one whole step: in the first H100 run 173 of 192 windows of
// 7-36 ms read 0 mJ and the rest ~20 J, and the projection of their sum missed the trainer's own
// NVML total by +60% and -76%. So:
//  - Per GPU, the update period is measured once per daemon, on a thread of its own started by
//    the first Open of the GPU (nvml_energy_periods.h; collectors/energy/update_period.h says how,
//    robust to late reads): ~500 ms of reads on the H100. Until it is known, every window's energy
//    is left out, named "the energy counter's update period is still being measured".
//  - A window's energy is kept only when the window spans >= kMinUpdates update periods: its
//    reading is then off by at most one step at each edge, 2 / kMinUpdates of the value (20%
//    at worst, unbiased: over many windows the steps at the edges cancel). A shorter window's
//    energy is left out and named ("window 12 ms shorter than 10 updates of the energy counter
//    (100.0 ms each)"), never reported.
//  - The counter is read at Begin only when a recent window was long enough to keep (the window
//    lengths come from the clock, not from NVML): on the H100 the two reads were 6.6 ms of the
//    collector's 8 ms per window, for values that were all left out.
// A counter that did not change during the measurement, or a read that failed, leaves the period
// unknown: energy is then left out with that reason.
//
// Pure.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "collectors/energy/update_period.h"

namespace seqpoint::collectors {

// The per-GPU rule over windows (see the file comment).
class EnergyWindowRule {
 public:
  static constexpr int kMinUpdates = 10;
  static constexpr size_t kRecentWindows = 16;

  static constexpr const char* kMeasuring =
      "the energy counter's update period is still being measured";

  // No period yet: it is being measured.
  EnergyWindowRule() = default;
  explicit EnergyWindowRule(UpdatePeriod period) : period_(std::move(period)) {}
  // The measured period (or why there is none); nullopt while it is being measured.
  const std::optional<UpdatePeriod>& period() const { return period_; }
  void set_period(UpdatePeriod p) { period_ = std::move(p); }
  // The shortest window whose energy is kept; nullopt when the period is not known.
  std::optional<int64_t> min_window_ns() const;
  // Whether Begin should read the counter: the period is known, and fewer than kRecentWindows
  // windows were seen or one of the last kRecentWindows reached half the minimum (the next may
  // reach it). A long window right after 16 short ones is then left out, and named.
  bool ReadAtBegin() const;
  // Records a window's length (every window, read or not).
  void Saw(int64_t window_ns);
  // Empty when a window of this length keeps its energy, else why not (one clause).
  std::string WhyLeftOut(int64_t window_ns) const;
  // "energy counter updates every 100.0 ms (mean of 4 gaps ...; 41 reads over 520.3 ms): energy
  // kept over windows of 1000.0 ms or more", or why there is no energy per window.
  std::string Describe() const;

 private:
  std::optional<UpdatePeriod> period_;
  std::deque<int64_t> recent_;
};

}  // namespace seqpoint::collectors
