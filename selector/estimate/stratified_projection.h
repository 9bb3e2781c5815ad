// Whole-run projections of a metric measured only on the chosen iterations, estimated stratum
// by stratum (time_strata.h) and SL bin by SL bin with ratio estimators against an auxiliary
// variable known for every iteration (docs/estimators.md):
//  - Auxiliary::kTime, for counters: value ~ rate x iteration time. Every iteration's time is
//    known, so warm-up and drift in time carry into the counter's projection.
//  - Auxiliary::kCpu, for counters of CPU work (task-clock, instructions, cycles): value ~ rate
//    x the process's CPU time over the iteration (TimeStrata::AddCpu). Time also holds the
//    waits of an iteration that stalls for a CPU (a loaded node), and a ratio through time
//    bills that wait as work; CPU time does not hold it. An iteration without a CPU time is
//    taken at its cell's CPU per unit of time; the caller picks kCpu only where nearly every
//    iteration has one (whole_run_estimator.cpp).
//  - Auxiliary::kCost, for iteration time itself (the self-check of representativeness) and
//    anything else whose per-iteration value is not otherwise known: value ~ rate x cost proxy
//    (SL x batch), the SeqPoint method's count(bin) x value(representative) made exact for the
//    mix of SLs inside a bin.
// A cell (stratum, bin) with measurements uses its own ratio; a cell without, its stratum's
// level times its bin's profile; a stratum without any, the nearest stratum's level of the same
// kind (warm-up or not), counted as borrowed. Optionally (ProjectionFrame) each SL's first
// occurrence is its own post-stratum (a first iteration pays for allocations). Intervals: Student t
// on the ratio estimators' residuals, pooled relatively (CV^2) across cells, plus what a borrowed,
// modelled or extrapolated estimate stands on; the wider of that and a jackknife in time; for a
// count against time, a high end with room for bursts no sample caught (the unseen tail). A metric
// is reported unbounded (high = +inf) when its samples cannot bound it: fewer than three non-zero
// values, one value over half of the sum, or fewer than kMinBoundedDof degrees of freedom.
//
// Cost: ProjectionFrame aggregates the population cells (every observed iteration, by stratum
// and bin) once; every metric and every jackknife group then only regroups the samples.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "selector/estimate/projection.h"
#include "selector/selection.h"
#include "selector/strata/time_strata.h"

namespace seqpoint::selector {

enum class Auxiliary { kCost, kTime, kCpu };

// An interval on fewer degrees of freedom than this is not called bounded.
inline constexpr double kMinBoundedDof = 3;

struct StrataSample {
  uint64_t ordinal = 0;
  uint32_t seq_len = 0;
  double cost = 0;   // cost proxy of the iteration
  double time = 0;   // its time (ns)
  double value = 0;  // the metric's value on it
  double cpu = -1;   // the process's CPU time over it (< 0: not known)
};

struct StratifiedProjection {
  MetricProjection whole;   // every iteration observed
  MetricProjection steady;  // the iterations after the warm-up (== whole when none was found)
  // The same total on strata that do not depend on the times (doubling windows only: no
  // warm-up or change boundary, both cut where time moved). For time itself this is the honest
  // self-check: strata cut on the checked series flatter it. Filled for Auxiliary::kCost.
  MetricProjection independent;
  bool bounded = true;    // false: the samples cannot bound the total; whole.high is +inf
  uint32_t strata = 0;    // strata with iterations
  uint32_t borrowed = 0;  // of them, strata with no measurement of their own
  uint32_t independent_strata = 0;
  uint64_t first_occurrences = 0;  // distinct SLs: first iterations, their own post-stratum
  uint64_t first_sampled = 0;      // of them, measured
};

// The population side of the projections (every observed iteration by stratum, bin and first
// occurrence), built once per recompute and shared by every metric projected from it. Holds a
// reference to `strata`: it must outlive the frame and not change meanwhile.
class ProjectionFrame {
 public:
  // `bins`: the selection whose points' [bin_lo, bin_hi] group SLs (SLs outside all go to the
  // nearest). `first_occurrences`: estimate each SL's first iteration as its own post-stratum
  // (k times a regular iteration of its cell, k from the first occurrences measured). Off by
  // default: with a small early budget it takes the few first-occurrence samples away from
  // the regular cells, and a run restored from an aggregated log (first occurrences replayed
  // at the mean time of their entry) then projects up to ~10% apart from the original
  // (agent/runs/run_tracker_test.cpp); see docs/estimators.md.
  ProjectionFrame(const TimeStrata& strata, const Selection& bins, bool first_occurrences = false);
  ~ProjectionFrame();
  ProjectionFrame(ProjectionFrame&&) noexcept;
  struct Impl;
  const Impl& impl() const { return *impl_; }
  // The share of the observed iterations that have a process CPU time (TimeStrata::AddCpu).
  double cpu_coverage() const;

 private:
  std::unique_ptr<Impl> impl_;
};

// `nonnegative`: the metric is a count, a time or an energy.
Result<StratifiedProjection> ProjectStratified(const ProjectionFrame& frame,
                                               const std::vector<StrataSample>& samples,
                                               Auxiliary aux, bool nonnegative = true);
// The same with a frame of its own (one metric).
Result<StratifiedProjection> ProjectStratified(const TimeStrata& strata, const Selection& bins,
                                               const std::vector<StrataSample>& samples,
                                               Auxiliary aux, bool nonnegative = true);

}  // namespace seqpoint::selector
