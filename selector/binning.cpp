#include "selector/binning.h"

#include <algorithm>
#include <cmath>

namespace seqpoint::selector {
namespace {

void ChooseRepresentative(const std::vector<SlBucket>& buckets, Bin& bin) {
  const double mean = bin.mean_cost(), mean2 = bin.mean_cost2();
  double best = INFINITY;
  uint64_t best_count = 0;
  bin.rep = bin.first;
  for (uint32_t i = bin.first; i <= bin.last; ++i) {
    const SlBucket& b = buckets[i];
    // A bucket with no eligible iteration cannot be measured: it is a representative only
    // when the whole bin is warm-up (then the picker reports the shortfall).
    double d = std::max(std::fabs(b.mean_cost() - mean) / std::max(mean, 1e-300),
                        std::fabs(b.mean_cost2() - mean2) / std::max(mean2, 1e-300));
    if (b.stats.eligible == 0 && bin.eligible > 0) continue;
    if (d < best || (d == best && b.stats.count > best_count)) {
      best = d;
      best_count = b.stats.count;
      bin.rep = i;
    }
  }
}

}  // namespace

std::vector<Bin> CutEqualCost(const std::vector<SlBucket>& buckets, uint32_t k) {
  std::vector<Bin> bins;
  if (buckets.empty() || k == 0) return bins;
  double total = 0;
  for (const auto& b : buckets) total += b.stats.sum_cost;
  k = std::min<uint32_t>(k, static_cast<uint32_t>(buckets.size()));
  double acc = 0;
  Bin cur;
  cur.first = 0;
  uint32_t made = 0;
  for (uint32_t i = 0; i < buckets.size(); ++i) {
    const SlBucket& b = buckets[i];
    cur.count += b.stats.count;
    cur.eligible += b.stats.eligible;
    cur.sum_cost += b.stats.sum_cost;
    cur.sum_cost2 += b.stats.sum_cost2;
    acc += b.stats.sum_cost;
    const uint32_t remaining_buckets = static_cast<uint32_t>(buckets.size()) - i - 1;
    const uint32_t bins_left_after = k - made - 1;
    bool cut = acc >= total * (made + 1) / k || remaining_buckets == bins_left_after;
    if (i + 1 == buckets.size()) cut = true;
    if (cut && (bins_left_after > 0 || i + 1 == buckets.size())) {
      cur.last = i;
      cur.lo = buckets[cur.first].lo;
      cur.hi = b.hi;
      bins.push_back(cur);
      ++made;
      cur = Bin();
      cur.first = i + 1;
    }
  }
  for (Bin& bin : bins) ChooseRepresentative(buckets, bin);
  return bins;
}

double ProxyErrorPct(const std::vector<SlBucket>& buckets, const std::vector<Bin>& bins) {
  double total = 0, err = 0, total2 = 0, err2 = 0;
  for (const Bin& bin : bins) {
    const double n = static_cast<double>(bin.count);
    total += bin.sum_cost;
    total2 += bin.sum_cost2;
    err += n * std::fabs(buckets[bin.rep].mean_cost() - bin.mean_cost());
    err2 += n * std::fabs(buckets[bin.rep].mean_cost2() - bin.mean_cost2());
  }
  return std::max(total > 0 ? 100.0 * err / total : 0.0, total2 > 0 ? 100.0 * err2 / total2 : 0.0);
}

std::vector<Bin> BinsForTarget(const std::vector<SlBucket>& buckets, double target_pct,
                               uint32_t max_bins) {
  max_bins =
      std::max<uint32_t>(1, std::min<uint32_t>(max_bins, static_cast<uint32_t>(buckets.size())));
  // Error falls roughly as 1/k^2 for smooth distributions: a doubling search then a bisection
  // keeps this O(log k) cuts. The final answer is checked, not assumed monotone.
  uint32_t hi = 1;
  while (hi < max_bins && ProxyErrorPct(buckets, CutEqualCost(buckets, hi)) > target_pct) {
    hi = std::min(max_bins, hi * 2);
  }
  uint32_t lo = hi / 2 + 1;
  uint32_t best = hi;
  while (lo < best) {
    uint32_t mid = (lo + best) / 2;
    if (ProxyErrorPct(buckets, CutEqualCost(buckets, mid)) <= target_pct)
      best = mid;
    else
      lo = mid + 1;
  }
  return CutEqualCost(buckets, best);
}

}  // namespace seqpoint::selector
