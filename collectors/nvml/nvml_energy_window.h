// Which windows NVML's total-energy counter can give the energy of.
//
// nvmlDeviceGetTotalEnergyConsumption (mJ since driver load) does not move continuously: the
// driver updates it in steps. On an H100 80GB HBM3 (driver 580.159.04) it moved every 100 ms
// (gaps 97-103 ms idle, 67-127 ms under load, ~7 J a step at 71 W), and one read cost 2.4-64 ms
// (bench/gpu/nvml_record.py; testdata/h100_energy_reads.csv). A window shorter than the update
// period reads 0 or one whole step: in the first H100 run 173 of 192 windows of 7-36 ms read
// 0 mJ and the rest ~20 J, and the projection of their sum missed the trainer's own NVML total
// by +60% and -76%. So:
//  - At Open, per GPU, the collector reads the counter back to back until it has seen it change
//    kProbeChanges times (or kProbeMaxNs / kProbeMaxReads pass): the update period is the mean
//    gap between the changes, each change placed midway between the two reads around it (a
//    read's instant is the middle of its [t0, t1] bracket). On the H100: ~250 ms, once per GPU.
//  - A window's energy is kept only when the window spans >= kMinUpdates update periods: its
//    reading is then off by at most one step at each edge, 2 / kMinUpdates of the value (20%
//    at worst, unbiased: over many windows the steps at the edges cancel). A shorter window's
//    energy is left out and named ("window 12 ms shorter than 10 updates of the energy counter
//    (100.0 ms each)"), never reported.
//  - The counter is read at Begin only when a recent window was long enough to keep (the window
//    lengths come from the clock, not from NVML): on the H100 the two reads were 6.6 ms of the
//    collector's 8 ms per window, for values that were all left out.
// A counter that did not change during the probe, or a read that failed, leaves the period
// unknown: energy is then left out with that reason.
//
// Pure except MeasureEnergyUpdatePeriod, which calls the read it is given.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"

namespace seqpoint::collectors {

// One read of the counter, bracketed by CLOCK_MONOTONIC (t0 before the call, t1 after).
struct EnergyRead {
  int64_t t0_ns = 0, t1_ns = 0;
  uint64_t mj = 0;
};

// The update period from reads made back to back.
class EnergyUpdateProbe {
 public:
  static constexpr int kProbeChanges = 3;  // two gaps: one late step does not set the period
  static constexpr int64_t kProbeMaxNs = 1'500'000'000;
  static constexpr int kProbeMaxReads = 2000;

  // Feeds the next read; true once kProbeChanges changes were seen.
  bool Add(const EnergyRead& r);
  bool done() const { return changes_ >= kProbeChanges; }
  int changes() const { return changes_; }
  // The mean gap between the changes seen; nullopt before two changes.
  std::optional<int64_t> period_ns() const;

 private:
  std::optional<EnergyRead> last_;
  int changes_ = 0;
  int64_t first_change_ns_ = 0, last_change_ns_ = 0;
};

// What the probe found for one GPU: the period, or why there is none.
struct EnergyUpdatePeriod {
  std::optional<int64_t> period_ns;
  std::string why_not;  // when period_ns is empty
  int reads = 0;
  int64_t spent_ns = 0;  // the probe's own time
};

// Reads back to back through `read` (t0/t1 from `now_ns`) until the probe is done or its caps
// pass, at most one read per `spacing_ns` of real time (a slept gap: NVML's reads take ms on a
// GPU, a test double's take ns). A failed read ends the probe with the read's reason.
EnergyUpdatePeriod MeasureEnergyUpdatePeriod(const std::function<Result<uint64_t>()>& read,
                                             const std::function<int64_t()>& now_ns,
                                             int64_t spacing_ns = 1'000'000);

// The per-GPU rule over windows (see the file comment).
class EnergyWindowRule {
 public:
  static constexpr int kMinUpdates = 10;
  static constexpr size_t kRecentWindows = 16;

  explicit EnergyWindowRule(EnergyUpdatePeriod period = {}) : period_(std::move(period)) {}
  const EnergyUpdatePeriod& period() const { return period_; }
  // The shortest window whose energy is kept; nullopt when the period is unknown.
  std::optional<int64_t> min_window_ns() const;
  // Whether Begin should read the counter: the period is known, and fewer than kRecentWindows
  // windows were seen or one of the last kRecentWindows reached half the minimum (the next may
  // reach it). A long window right after 16 short ones is then left out, and named.
  bool ReadAtBegin() const;
  // Records a window's length (every window, read or not).
  void Saw(int64_t window_ns);
  // Empty when a window of this length keeps its energy, else why not (one clause).
  std::string WhyLeftOut(int64_t window_ns) const;
  // "energy counter updates every 100.0 ms (measured at open over 3 changes, 41 reads):
  // energy kept over windows of 1000 ms or more", or why there is no energy per window.
  std::string Describe() const;

 private:
  EnergyUpdatePeriod period_;
  std::deque<int64_t> recent_;
};

}  // namespace seqpoint::collectors
