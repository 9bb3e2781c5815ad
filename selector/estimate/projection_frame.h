// The inside of ProjectionFrame (stratified_projection.h): the population cells of a run by
// (stratum, SL bin), on two stratifications (the run's time strata, and doubling windows
// only), and each SL's first occurrence apart. Only stratified_projection*.cpp include this.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "selector/estimate/stratified_projection.h"

namespace seqpoint::selector {

// SL -> index of the bin holding it (nearest bin for SLs between or outside bins).
class BinIndex {
 public:
  explicit BinIndex(const Selection& sel);
  uint32_t Of(uint32_t seq_len) const;
  uint32_t size() const { return static_cast<uint32_t>(ranges_.size()); }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// Every observed iteration of one (stratum, bin), first occurrences taken out.
struct PopCell {
  uint32_t h = 0, b = 0;
  double n = 0, time = 0, cost = 0;
  double cpu_n = 0, cpu = 0, cpu_time = 0;  // the iterations with a process CPU time
  // The cell's process CPU time, its iterations without one at the cell's CPU per unit of
  // time (or the run's, `fallback`, when none of the cell has one).
  double CpuAll(double fallback) const {
    return cpu_time > 0 ? cpu * time / cpu_time : time * fallback;
  }
};

// One SL's first occurrence: its own post-stratum.
struct FirstPop {
  uint32_t h = 0, hc = 0, b = 0;  // stratum, window-only stratum, bin
  double time = 0, cost = 0;
};

struct Layout {
  std::vector<bool> warmup;  // per stratum
  std::vector<PopCell> cells;
  std::unordered_map<uint64_t, size_t> index;  // h << 32 | b -> cells
  uint32_t with_iterations = 0;
};

struct ProjectionFrame::Impl {
  const TimeStrata* strata = nullptr;
  BinIndex bins;
  Layout full, windows;
  std::vector<uint32_t> window_of;  // stratum -> window-only stratum
  std::vector<FirstPop> firsts;
  std::unordered_map<uint32_t, uint64_t> first_ordinal;  // SL -> ordinal of its first
  // Of the observed iterations, the share with a process CPU time, and the run's CPU per unit
  // of time over them (Auxiliary::kCpu).
  double cpu_coverage = 0, cpu_per_time = 0;
  explicit Impl(const Selection& sel) : bins(sel) {}
};

}  // namespace seqpoint::selector
