#include "selector/point_merge.h"

#include <cmath>

namespace seqpoint::selector {

std::vector<SeqPoint> MergeIntoPoints(std::vector<PointDraft> drafts, uint32_t counter_groups) {
  // Merge each sample-less draft into its nearer (in mean cost) neighbour that has samples.
  for (size_t i = 0; i < drafts.size(); ++i) {
    if (!drafts[i].samples.empty() || drafts[i].weight == 0) continue;
    const double mean = drafts[i].sum_cost / static_cast<double>(drafts[i].weight);
    long best = -1;
    double best_d = INFINITY;
    for (long j : {static_cast<long>(i) - 1, static_cast<long>(i) + 1}) {
      // Walk outwards to the nearest draft that has samples on each side.
      long k = j;
      while (k >= 0 && k < static_cast<long>(drafts.size()) && drafts[k].samples.empty())
        k += (j < static_cast<long>(i) ? -1 : 1);
      if (k < 0 || k >= static_cast<long>(drafts.size())) continue;
      double m = drafts[k].sum_cost / static_cast<double>(drafts[k].weight);
      if (std::fabs(m - mean) < best_d) {
        best_d = std::fabs(m - mean);
        best = k;
      }
    }
    if (best < 0) continue;  // no draft has samples at all
    PointDraft& to = drafts[best];
    to.weight += drafts[i].weight;
    to.sum_cost += drafts[i].sum_cost;
    to.bin_lo = std::min(to.bin_lo, drafts[i].bin_lo);
    to.bin_hi = std::max(to.bin_hi, drafts[i].bin_hi);
    drafts[i].weight = 0;
  }
  std::vector<SeqPoint> points;
  for (auto& d : drafts) {
    if (d.samples.empty() || d.weight == 0) continue;
    SeqPoint p;
    p.iter = d.samples.front().iter;
    p.seq_len = d.samples.front().seq_len;
    p.weight = d.weight;
    p.bin_lo = d.bin_lo;
    p.bin_hi = d.bin_hi;
    p.mean_cost = d.sum_cost / static_cast<double>(d.weight);
    p.rep_cost = d.rep_cost;
    for (size_t j = 0; j < d.samples.size(); ++j) {
      p.iters.push_back(d.samples[j].iter);
      if (counter_groups > 1) p.groups.push_back(static_cast<uint32_t>(j % counter_groups));
    }
    points.push_back(std::move(p));
  }
  return points;
}

}  // namespace seqpoint::selector
