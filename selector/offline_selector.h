// Offline SeqPoint selection (the paper's method, plus repeat samples), in two streaming passes
// over a run so that memory stays bounded for any run length:
//   pass 1: feed every iteration to an SlHistogram;
//   PlanOffline(): bins, representatives and how many samples each bin gets;
//   pass 2: feed every iteration again to an OccurrencePicker, which picks the iterations.
// Samples of a bin are taken from its representative SL first, spread evenly over the run
// (so drift and warm-up do not concentrate in one point), then from the SLs nearest in cost.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "selector/binning.h"
#include "selector/selection.h"
#include "selector/sl_histogram.h"

namespace seqpoint::selector {

struct OfflineOptions {
  // Cap on measured iterations; 0 = no cap (then `repeats` samples per point).
  uint64_t budget = 0;
  // Largest acceptable cost-proxy representative error, percent (binning.h).
  double target_error_pct = 0.5;
  // Samples per point when there is no budget; with a budget, what is left after one sample
  // per point is spread over the points in proportion to their cost share.
  uint32_t repeats = 3;
  // With a budget, bins are limited to budget / min_samples_per_point so that each point can
  // get this many samples (noise estimate needs >= 2).
  uint32_t min_samples_per_point = 2;
  uint32_t max_bins = 4096;
  // The first `warmup` iterations are counted but never measured (allocator and JIT warm-up).
  uint64_t warmup = 10;
  uint32_t counter_groups = 1;  // rotate measurement groups across a point's samples
};

// One bucket's share of the sampling: take `take` of its `eligible` occurrences, evenly spaced.
struct BucketTake {
  uint32_t bucket_index = 0;  // SlHistogram bucket index
  uint64_t eligible = 0;
  uint64_t take = 0;
};

struct OfflinePlan {
  std::vector<SlBucket> buckets;
  std::vector<Bin> bins;
  std::vector<std::vector<BucketTake>> takes;  // per bin, representative's bucket first
  OfflineOptions options;
  uint64_t iterations = 0;
  double proxy_error_pct = 0;
};

Result<OfflinePlan> PlanOffline(const SlHistogram& histogram, const OfflineOptions& options);

class OccurrencePicker {
 public:
  explicit OccurrencePicker(const OfflinePlan& plan);
  // Feed the same iterations as pass 1, in the same order. `index` is the row's 0-based
  // position (warm-up is by position); `iter` is what the selection reports.
  void Observe(uint64_t index, uint64_t iter, uint32_t seq_len);
  Result<Selection> Finish();

 private:
  struct Want {
    uint64_t seen = 0;  // eligible occurrences so far
    uint64_t taken = 0;
    uint64_t eligible = 0;
    uint64_t take = 0;
    int32_t bin = -1;
  };
  const OfflinePlan& plan_;
  std::vector<int32_t> want_of_bucket_;  // SlHistogram bucket index -> index into wants_
  std::vector<Want> wants_;
  std::vector<std::vector<std::pair<uint32_t, uint64_t>>> picked_;  // per bin: (seq_len, iter)
  uint64_t observed_ = 0;
};

}  // namespace seqpoint::selector
