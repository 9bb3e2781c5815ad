// Turning bins with their picked samples into SeqPoints, shared by the offline and online
// selectors. A bin that got no sample (all warm-up, or the budget ran out) cannot stand for
// itself: its weight joins the adjacent bin nearest in mean cost, so weights still sum to the
// run's iterations and nothing is silently dropped.
#pragma once

#include <cstdint>
#include <vector>

#include "selector/selection.h"

namespace seqpoint::selector {

struct DraftSample {
  uint64_t iter = 0;
  uint32_t seq_len = 0;
};

struct PointDraft {
  uint32_t bin_lo = 0, bin_hi = 0;
  uint64_t weight = 0;
  double sum_cost = 0;
  double rep_cost = 0;
  std::vector<DraftSample> samples;  // representative first
};

// Drafts are in ascending SL order. counter_groups >= 1: sample j of a point holds group
// j mod counter_groups.
std::vector<SeqPoint> MergeIntoPoints(std::vector<PointDraft> drafts, uint32_t counter_groups);

}  // namespace seqpoint::selector
