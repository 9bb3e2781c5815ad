// Whole-run projections of a metric measured only on the chosen iterations, estimated stratum
// by stratum (time_strata.h) and SL bin by SL bin with ratio estimators against an auxiliary
// variable known for every iteration (docs/estimators.md):
//  - Auxiliary::kTime, for counters: value ~ rate x iteration time. Every iteration's time is
//    known, so warm-up and drift in time carry into the counter's projection.
//  - Auxiliary::kCost, for iteration time itself (the self-check of representativeness) and
//    anything else whose per-iteration value is not otherwise known: value ~ rate x cost proxy
//    (SL x batch), the SeqPoint method's count(bin) x value(representative) made exact for the
//    mix of SLs inside a bin.
// A cell (stratum, bin) with measurements uses its own ratio; a cell without, its stratum's; a
// stratum without any, the nearest stratum's of the same kind (warm-up or not), counted as
// borrowed. Intervals: Student t on the pooled within-cell residual variance, plus the spread
// of the ratios a borrowed or stratum-level estimate stands on. Totals of non-negative metrics
// never get a negative bound; a metric whose samples cannot bound it (fewer than three non-zero
// values, or one value over half of the sum) is reported unbounded (high = +inf).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "selector/projection.h"
#include "selector/selection.h"
#include "selector/time_strata.h"

namespace seqpoint::selector {

enum class Auxiliary { kCost, kTime };

struct StrataSample {
  uint64_t ordinal = 0;
  uint32_t seq_len = 0;
  double cost = 0;   // cost proxy of the iteration
  double time = 0;   // its time (ns)
  double value = 0;  // the metric's value on it
};

struct StratifiedProjection {
  MetricProjection whole;   // every iteration observed
  MetricProjection steady;  // the iterations after the warm-up (== whole when none was found)
  bool bounded = true;      // false: the samples cannot bound the total; whole.high is +inf
  uint32_t strata = 0;      // strata with iterations
  uint32_t borrowed = 0;    // of them, strata with no measurement of their own
};

// `bins`: the selection whose points' [bin_lo, bin_hi] group SLs (SLs outside all go to the
// nearest). `nonnegative`: the metric is a count, a time or an energy.
Result<StratifiedProjection> ProjectStratified(const TimeStrata& strata, const Selection& bins,
                                               const std::vector<StrataSample>& samples,
                                               Auxiliary aux, bool nonnegative = true);

}  // namespace seqpoint::selector
