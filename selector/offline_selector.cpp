#include "selector/offline_selector.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "selector/point_merge.h"

namespace seqpoint::selector {
namespace {

// Samples per bin: one each, the rest in proportion to cost share (largest remainder), capped
// by what the bin can offer. Bins are equal-cost, so this is near-uniform in practice.
std::vector<uint64_t> Allocate(const std::vector<Bin>& bins, const OfflineOptions& o) {
  std::vector<uint64_t> n(bins.size(), 0);
  if (o.budget == 0) {
    for (size_t i = 0; i < bins.size(); ++i) n[i] = std::min<uint64_t>(o.repeats, bins[i].eligible);
    return n;
  }
  uint64_t left = o.budget;
  for (size_t i = 0; i < bins.size() && left > 0; ++i) {
    if (bins[i].eligible > 0) {
      n[i] = 1;
      --left;
    }
  }
  // Repeated rounds: share what is left among bins that still have room.
  while (left > 0) {
    double share_total = 0;
    for (size_t i = 0; i < bins.size(); ++i) {
      if (n[i] < bins[i].eligible) share_total += bins[i].sum_cost;
    }
    if (share_total <= 0) break;
    const uint64_t round = left;
    std::vector<std::pair<double, size_t>> remainders;
    uint64_t given = 0;
    for (size_t i = 0; i < bins.size(); ++i) {
      if (n[i] >= bins[i].eligible) continue;
      double exact = static_cast<double>(round) * bins[i].sum_cost / share_total;
      uint64_t whole = std::min<uint64_t>(static_cast<uint64_t>(exact), bins[i].eligible - n[i]);
      n[i] += whole;
      given += whole;
      remainders.emplace_back(exact - std::floor(exact), i);
    }
    left -= given;
    std::sort(remainders.begin(), remainders.end(), std::greater<>());
    for (auto& [frac, i] : remainders) {
      if (left == 0) break;
      if (n[i] < bins[i].eligible) {
        ++n[i];
        --left;
      }
    }
    if (given == 0 && left == round) break;  // nothing could be placed
  }
  return n;
}

}  // namespace

Result<OfflinePlan> PlanOffline(const SlHistogram& histogram, const OfflineOptions& options) {
  OfflinePlan plan;
  plan.options = options;
  plan.iterations = histogram.total();
  plan.buckets = histogram.Buckets();
  if (plan.buckets.empty()) {
    return InvalidArgument("the trace has no iterations to select from");
  }
  if (options.target_error_pct <= 0 || !std::isfinite(options.target_error_pct)) {
    return InvalidArgument("target error must be a positive percentage, got " +
                           std::to_string(options.target_error_pct));
  }
  uint32_t max_bins = options.max_bins;
  if (options.budget > 0) {
    uint64_t per = std::max<uint32_t>(1, options.min_samples_per_point);
    uint64_t cap = std::max<uint64_t>(1, options.budget / per);
    max_bins = static_cast<uint32_t>(std::min<uint64_t>(max_bins, cap));
  }
  plan.bins = BinsForTarget(plan.buckets, options.target_error_pct, max_bins);
  plan.proxy_error_pct = ProxyErrorPct(plan.buckets, plan.bins);

  std::vector<uint64_t> samples = Allocate(plan.bins, options);
  plan.takes.resize(plan.bins.size());
  for (size_t bi = 0; bi < plan.bins.size(); ++bi) {
    const Bin& bin = plan.bins[bi];
    std::vector<uint32_t> order(bin.last - bin.first + 1);
    std::iota(order.begin(), order.end(), bin.first);
    const double mean = bin.mean_cost();
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      if (a == bin.rep || b == bin.rep) return a == bin.rep && b != bin.rep;
      return std::fabs(plan.buckets[a].mean_cost() - mean) <
             std::fabs(plan.buckets[b].mean_cost() - mean);
    });
    uint64_t need = samples[bi];
    for (uint32_t idx : order) {
      if (need == 0) break;
      const SlBucket& b = plan.buckets[idx];
      uint64_t take = std::min<uint64_t>(need, b.stats.eligible);
      if (take == 0) continue;
      plan.takes[bi].push_back({b.index, b.stats.eligible, take});
      need -= take;
    }
  }
  return plan;
}

OccurrencePicker::OccurrencePicker(const OfflinePlan& plan) : plan_(plan) {
  picked_.resize(plan.bins.size());
  for (size_t bi = 0; bi < plan.takes.size(); ++bi) {
    for (const BucketTake& t : plan.takes[bi]) {
      if (t.bucket_index >= want_of_bucket_.size()) want_of_bucket_.resize(t.bucket_index + 1, -1);
      want_of_bucket_[t.bucket_index] = static_cast<int32_t>(wants_.size());
      wants_.push_back({0, 0, t.eligible, t.take, static_cast<int32_t>(bi)});
    }
  }
}

void OccurrencePicker::Observe(uint64_t index, uint64_t iter, uint32_t seq_len) {
  ++observed_;
  if (index < plan_.options.warmup) return;
  uint32_t b = SlHistogram::BucketIndex(seq_len);
  if (b >= want_of_bucket_.size() || want_of_bucket_[b] < 0) return;
  Want& w = wants_[want_of_bucket_[b]];
  uint64_t k = w.seen++;
  if (w.taken >= w.take) return;
  // Evenly spaced: the j-th pick is the floor((j + 1/2) * eligible / take)-th occurrence.
  uint64_t target =
      static_cast<uint64_t>((static_cast<double>(w.taken) + 0.5) * static_cast<double>(w.eligible) /
                            static_cast<double>(w.take));
  if (k >= target) {
    ++w.taken;
    picked_[w.bin].emplace_back(seq_len, iter);
  }
}

Result<Selection> OccurrencePicker::Finish() {
  if (observed_ != plan_.iterations) {
    return Internal("the trace changed between the two passes (" +
                    std::to_string(plan_.iterations) + " rows, then " + std::to_string(observed_) +
                    ")");
  }
  std::vector<PointDraft> drafts;
  for (size_t bi = 0; bi < plan_.bins.size(); ++bi) {
    const Bin& bin = plan_.bins[bi];
    PointDraft d;
    d.bin_lo = bin.lo;
    d.bin_hi = bin.hi;
    d.weight = bin.count;
    d.sum_cost = bin.sum_cost;
    d.rep_cost = plan_.buckets[bin.rep].mean_cost();
    const SlBucket& rep = plan_.buckets[bin.rep];
    // Representative: the median-in-time pick of the representative SL.
    std::vector<std::pair<uint32_t, uint64_t>> rep_picks, others;
    for (auto& p : picked_[bi])
      (p.first >= rep.lo && p.first <= rep.hi ? rep_picks : others).push_back(p);
    if (!rep_picks.empty()) {
      size_t mid = rep_picks.size() / 2;
      d.samples.push_back({rep_picks[mid].second, rep_picks[mid].first});
      for (size_t i = 0; i < rep_picks.size(); ++i) {
        if (i != mid) d.samples.push_back({rep_picks[i].second, rep_picks[i].first});
      }
    }
    for (auto& p : others) d.samples.push_back({p.second, p.first});
    drafts.push_back(std::move(d));
  }
  Selection s;
  s.iterations = plan_.iterations;
  s.method = "seqpoint-offline";
  s.budget = plan_.options.budget;
  s.proxy_error_pct = plan_.proxy_error_pct;
  s.counter_groups = std::max<uint32_t>(1, plan_.options.counter_groups);
  s.points = MergeIntoPoints(std::move(drafts), s.counter_groups);
  if (s.points.empty()) {
    return InvalidArgument("no iteration can be measured: all " + std::to_string(s.iterations) +
                           " iterations fall in the warm-up of " +
                           std::to_string(plan_.options.warmup) + " (lower --warmup)");
  }
  return s;
}

}  // namespace seqpoint::selector
