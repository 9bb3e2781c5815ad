#include "selector/online_selector.h"

#include <algorithm>
#include <cmath>

#include "selector/point_merge.h"

namespace seqpoint::selector {

Result<OnlineSelector> OnlineSelector::Create(const OnlineOptions& o) {
  if (o.budget_count == 0 && o.budget_fraction <= 0) {
    return InvalidArgument("online selection needs a budget: a count (e.g. 50) or a fraction "
                           "of iterations (e.g. 0.005)");
  }
  if (!(o.budget_fraction >= 0 && o.budget_fraction <= 1)) {
    return InvalidArgument("budget fraction must be between 0 and 1, got " +
                           std::to_string(o.budget_fraction));
  }
  if (o.target_error_pct <= 0) return InvalidArgument("target error must be positive");
  if (o.max_bins == 0) return InvalidArgument("max_bins must be at least 1");
  return OnlineSelector(o);
}

uint64_t OnlineSelector::allowed() const {
  uint64_t cap = UINT64_MAX;
  if (options_.budget_count > 0) cap = options_.budget_count;
  if (options_.budget_fraction > 0) {
    uint64_t f = static_cast<uint64_t>(std::floor(options_.budget_fraction *
                                                  static_cast<double>(histogram_.total()) + 1e-9));
    cap = std::min(cap, f);
  }
  return cap;
}

void OnlineSelector::Rebin() {
  buckets_ = histogram_.Buckets();
  // As many bins as the budget can give min_samples_per_point each, at the current cap (a
  // fraction budget grows with the run, so bins multiply as the run goes on).
  uint64_t cap = allowed();
  if (options_.budget_count > 0) cap = std::max<uint64_t>(cap, 1);
  uint64_t by_budget = std::max<uint64_t>(1, cap / std::max<uint32_t>(1, options_.min_samples_per_point));
  uint32_t max_bins = static_cast<uint32_t>(std::min<uint64_t>(options_.max_bins, by_budget));
  bins_ = BinsForTarget(buckets_, options_.target_error_pct, max_bins);
  bin_samples_.assign(bins_.size(), 0);
  binned_cost_ = 0;
  for (size_t b = 0; b < bins_.size(); ++b) {
    binned_cost_ += bins_[b].sum_cost;
    // Samples are counted per SL bucket, so re-binning costs O(buckets), not O(samples).
    for (uint32_t i = bins_[b].first; i <= bins_[b].last; ++i) {
      uint32_t bucket = buckets_[i].index;
      if (bucket < samples_in_bucket_.size()) bin_samples_[b] += samples_in_bucket_[bucket];
    }
  }
  // Dense bucket -> bin table over the binned range, so OnIteration finds a bin in O(1).
  // Bucket indices between two bins belong to the upper one (as FindBin's search did).
  bin_of_bucket_.clear();
  if (!bins_.empty()) {
    bin_of_bucket_.assign(buckets_[bins_.back().last].index + 1, -1);
    uint32_t next = 0;
    for (size_t b = 0; b < bins_.size(); ++b) {
      uint32_t end = buckets_[bins_[b].last].index;
      for (; next <= end; ++next) bin_of_bucket_[next] = static_cast<int32_t>(b);
    }
  }
  binned_lo_ = bins_.empty() ? UINT32_MAX : bins_.front().lo;
  binned_hi_ = bins_.empty() ? 0 : bins_.back().hi;
  ++rebins_;
}

int OnlineSelector::FindBin(uint32_t seq_len) const {
  if (bins_.empty()) return -1;
  uint32_t bucket = SlHistogram::BucketIndex(seq_len);
  if (bucket < bin_of_bucket_.size()) return bin_of_bucket_[bucket];
  // bins_ are ascending and contiguous in bucket order; SLs between bins belong to the bin
  // whose range is above them (upper_bound on hi).
  auto it = std::lower_bound(bins_.begin(), bins_.end(), seq_len,
                             [](const Bin& b, uint32_t sl) { return b.hi < sl; });
  if (it == bins_.end()) return static_cast<int>(bins_.size()) - 1;
  return static_cast<int>(it - bins_.begin());
}

uint64_t OnlineSelector::WantedIn(size_t bin) const {
  if (binned_cost_ <= 0) return 1;
  // The cap the budget allows at this moment, spread by cost share, rounded up (the global cap
  // still holds); at least one per bin.
  uint64_t cap = allowed();
  if (cap == UINT64_MAX) cap = 0;
  double want = static_cast<double>(cap) * bins_[bin].sum_cost / binned_cost_;
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(want - 1e-9)));
}

Decision OnlineSelector::OnIteration(uint64_t iter, uint32_t seq_len, uint32_t batch, double tokens) {
  const uint64_t index = histogram_.total();
  const bool eligible = index >= options_.warmup;
  histogram_.Add(seq_len, CostProxy(seq_len, batch), tokens, eligible);
  const uint64_t t = histogram_.total();
  if (t >= next_rebin_ || seq_len < binned_lo_ || seq_len > binned_hi_ ||
      (options_.rebin_every > 0 && t % options_.rebin_every == 0)) {
    Rebin();
    while (next_rebin_ <= t) next_rebin_ *= 2;
  }
  Decision d;
  if (!eligible || samples_.size() >= allowed()) return d;
  int b = FindBin(seq_len);
  if (b < 0 || bin_samples_[b] >= WantedIn(static_cast<size_t>(b)) ||
      bin_samples_[b] >= options_.max_samples_per_point) {
    return d;
  }
  d.measure = true;
  d.group = static_cast<uint32_t>(bin_samples_[b] % std::max<uint32_t>(1, options_.counter_groups));
  ++bin_samples_[b];
  samples_.push_back({iter, seq_len, d.group});
  uint32_t bucket = SlHistogram::BucketIndex(seq_len);
  if (bucket >= samples_in_bucket_.size()) samples_in_bucket_.resize(bucket + 1, 0);
  ++samples_in_bucket_[bucket];
  return d;
}

Selection OnlineSelector::Current() {
  Rebin();
  std::vector<PointDraft> drafts(bins_.size());
  for (size_t i = 0; i < bins_.size(); ++i) {
    drafts[i].bin_lo = bins_[i].lo;
    drafts[i].bin_hi = bins_[i].hi;
    drafts[i].weight = bins_[i].count;
    drafts[i].sum_cost = bins_[i].sum_cost;
    drafts[i].rep_cost = buckets_[bins_[i].rep].mean_cost();
  }
  // Representative: the sample whose SL's mean cost is nearest the bin's mean cost.
  for (const Sample& s : samples_) {
    int b = FindBin(s.seq_len);
    if (b >= 0) drafts[b].samples.push_back({s.iter, s.seq_len});
  }
  for (size_t i = 0; i < drafts.size(); ++i) {
    auto& v = drafts[i].samples;
    if (v.size() < 2) continue;
    const double mean = bins_[i].mean_cost();
    auto cost_of = [&](uint32_t sl) {
      const SlStats* st = histogram_.Find(sl);
      return st && st->count ? st->sum_cost / static_cast<double>(st->count) : 0.0;
    };
    auto best = std::min_element(v.begin(), v.end(), [&](const DraftSample& a, const DraftSample& b) {
      return std::fabs(cost_of(a.seq_len) - mean) < std::fabs(cost_of(b.seq_len) - mean);
    });
    std::rotate(v.begin(), best, best + 1);
  }
  Selection sel;
  sel.iterations = histogram_.total();
  sel.method = "seqpoint-online";
  sel.budget = options_.budget_count;
  sel.proxy_error_pct = ProxyErrorPct(buckets_, bins_);
  sel.counter_groups = std::max<uint32_t>(1, options_.counter_groups);
  sel.points = MergeIntoPoints(std::move(drafts), 1);
  // Groups were fixed when each sample was taken; carry them over.
  if (sel.counter_groups > 1) {
    for (auto& p : sel.points) {
      for (uint64_t it : p.iters) {
        for (const Sample& s : samples_) {
          if (s.iter == it) {
            p.groups.push_back(s.group);
            break;
          }
        }
      }
    }
  }
  return sel;
}

size_t OnlineSelector::MemoryBytes() const {
  return sizeof(*this) + histogram_.MemoryBytes() + buckets_.capacity() * sizeof(SlBucket) +
         bins_.capacity() * sizeof(Bin) + bin_samples_.capacity() * sizeof(uint64_t) +
         samples_.capacity() * sizeof(Sample) + samples_in_bucket_.capacity() * sizeof(uint32_t) +
         bin_of_bucket_.capacity() * sizeof(int32_t);
}

}  // namespace seqpoint::selector
