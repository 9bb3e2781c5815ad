// Binning of the SL histogram into contiguous SL ranges (the paper's bins) and the choice of
// one representative SL per bin.
//
// Bins are cut at equal shares of the total cost proxy, so each bin carries about the same
// share of the run's work: with noise proportional to cost, that is also where equal numbers
// of samples per bin minimise the projection's variance (Neyman allocation).
// The representative of a bin is the eligible SL whose linear and quadratic cost terms are
// both closest, relatively, to the bin's means (ties: the more frequent SL), so that
// count x cost(representative) ~ the bin's total for any cost of the model in sl_histogram.h.
#pragma once

#include <cstdint>
#include <vector>

#include "selector/sl_histogram.h"

namespace seqpoint::selector {

struct Bin {
  uint32_t lo = 0, hi = 0;       // SL range, inclusive
  uint32_t first = 0, last = 0;  // indices into the bucket vector it was cut from
  uint64_t count = 0;            // iterations in the bin (the SeqPoint weight)
  uint64_t eligible = 0;
  double sum_cost = 0;
  double sum_cost2 = 0;
  uint32_t rep = 0;  // bucket index (into the vector) of the representative
  double mean_cost() const { return count ? sum_cost / count : 0.0; }
  double mean_cost2() const { return count ? sum_cost2 / count : 0.0; }
};

// Cuts `buckets` (ascending, non-empty) into at most `k` bins of about equal cost share.
std::vector<Bin> CutEqualCost(const std::vector<SlBucket>& buckets, uint32_t k);

// The cost-model error of projecting with one representative per bin, in percent of the total:
// for each term c of the model (L*B and L^2*B), sum over bins of count x |c(rep) - mean c| over
// the total of c; the larger of the two. Errors of opposite sign are not allowed to cancel.
// Because (a*e1 + b*e2) / (a*T1 + b*T2) <= max(e1/T1, e2/T2), this bounds the representative
// error of every cost alpha*L*B + beta*L^2*B with alpha, beta >= 0.
double ProxyErrorPct(const std::vector<SlBucket>& buckets, const std::vector<Bin>& bins);

// The fewest bins (<= max_bins) whose ProxyErrorPct is <= target_pct; max_bins if none is.
std::vector<Bin> BinsForTarget(const std::vector<SlBucket>& buckets, double target_pct,
                               uint32_t max_bins);

}  // namespace seqpoint::selector
