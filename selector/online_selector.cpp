#include "selector/online_selector.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "selector/point_merge.h"

namespace seqpoint::selector {
namespace {

// SplitMix64's finalizer: a well-spread deterministic draw from an iteration number.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A uniform draw in [0, 1) from an iteration number, independent of Mix(iter)'s low bit (the
// draw that skips half the candidates): thinning must not select on it.
double Uniform(uint64_t iter) {
  return static_cast<double>(Mix(iter ^ 0x6a09e667f3bcc909ULL) >> 11) * 0x1.0p-53;
}

}  // namespace

Result<OnlineSelector> OnlineSelector::Create(const OnlineOptions& o) {
  if (o.budget_count == 0 && o.budget_fraction <= 0 && o.per_doubling == 0) {
    return InvalidArgument(
        "online selection needs a budget: a count (e.g. 50), a fraction "
        "of iterations (e.g. 0.005) or measurements per doubling of the run "
        "(e.g. 16)");
  }
  if (!(o.budget_fraction >= 0 && o.budget_fraction <= 1)) {
    return InvalidArgument("budget fraction must be between 0 and 1, got " +
                           std::to_string(o.budget_fraction));
  }
  if (o.target_error_pct <= 0) return InvalidArgument("target error must be positive");
  if (o.max_bins == 0) return InvalidArgument("max_bins must be at least 1");
  return OnlineSelector(o);
}

OnlineSelector::OnlineSelector(const OnlineOptions& o)
    : options_(o),
      cap_(BudgetCapTerms{o.budget_count, o.pacing_iterations, o.per_doubling, o.window,
                          o.budget_fraction}),
      strata_(o.strata),
      next_periodic_rebin_(o.rebin_every) {
  allowed_ = cap_.At(0, 0);
}

uint32_t OnlineSelector::MaxBinsNow() const {
  // As many bins as the budget can give min_samples_per_point each, at the current cap (a
  // budget grows with the run, so bins multiply as the run goes on).
  uint64_t cap = std::max<uint64_t>(allowed(), 1);
  if (cap == UINT64_MAX) cap = 1;
  uint64_t by_budget =
      std::max<uint64_t>(1, cap / std::max<uint32_t>(1, options_.min_samples_per_point));
  return static_cast<uint32_t>(std::min<uint64_t>(options_.max_bins, by_budget));
}

void OnlineSelector::Rebin() {
  buckets_ = histogram_.Buckets();
  bins_ = BinsForTarget(buckets_, options_.target_error_pct, MaxBinsNow());
  bin_samples_.assign(bins_.size(), 0);
  want_.assign(bins_.size(), 0);
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

uint64_t OnlineSelector::WantedIn(size_t bin) {
  if (binned_cost_ <= 0) return 1;
  // The cap the budget allows at this moment, spread by cost share, rounded up (the global cap
  // still holds); at least one per bin.
  uint64_t cap = allowed_;
  if (cap == UINT64_MAX) cap = 0;
  // What the budget released since the stratum began is what it may spend on it.
  const uint64_t picked_before = measured_at_stratum_ + thinned_at_stratum_;
  cap = cap > picked_before ? cap - picked_before : 0;
  // Kept per bin until the spendable budget or the bins change: most iterations ask, and the
  // budget steps only now and then.
  if (cap != want_budget_) {
    std::fill(want_.begin(), want_.end(), 0);
    want_budget_ = cap;
  }
  if (want_[bin] == 0) {
    const double want = static_cast<double>(cap) * bins_[bin].sum_cost / binned_cost_;
    want_[bin] = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(want - 1e-9)));
  }
  return want_[bin];
}

bool OnlineSelector::WantsNext() const {
  const uint64_t next = histogram_.total() + 1;  // t after the next OnIteration
  const uint64_t ahead = next + options_.hook_lead;
  if (ahead <= options_.warmup) return false;  // its index is still warm-up
  // Not while the next pick is sure to be thinned (ThinCause): begin hooks cost the probes.
  const bool past_floors =
      samples_.size() >= options_.overhead_floor &&
      samples_.size() - measured_at_stratum_ >= options_.min_samples_per_stratum;
  if ((past_floors && (OverheadSpent() || keep_ <= 0)) || StratumPreciseEnough()) return false;
  return Picks() < cap_.Peek(ahead, bonus_);
}

bool OnlineSelector::StratumPreciseEnough(double* half_width) const {
  double hw = INFINITY;
  const uint64_t n = samples_.size() - measured_at_stratum_;
  // The pooled within-SL variance has N - k degrees of freedom (k: SL buckets seen): an SL
  // seen once says nothing of its spread, so a stretch of mostly new SLs stays "unknown".
  const double dof = stratum_total_.n - static_cast<double>(stratum_buckets_);
  if (dof >= 8 && n > 0 && stratum_total_.sum > 0) {
    const double mean = stratum_total_.sum / stratum_total_.n;
    const double var = std::max(0.0, within_ss_) / dof;
    hw = 1.96 * std::sqrt(var / static_cast<double>(n)) / mean;
  }
  if (half_width != nullptr) *half_width = hw;
  return options_.target_rel_error > 0 && n >= options_.min_samples_per_stratum &&
         hw <= options_.target_rel_error;
}

Decision OnlineSelector::OnIteration(uint64_t iter, uint32_t seq_len, uint32_t batch, double tokens,
                                     bool can_measure, bool over_budget) {
  if (!can_measure) ++unmeasurable_;
  const uint64_t index = histogram_.total();
  const bool eligible = index >= options_.warmup;
  histogram_.Add(seq_len, CostProxy(seq_len, batch), tokens, eligible);
  const uint64_t t = histogram_.total();
  allowed_ = cap_.At(t, bonus_);
  // Every rebin_every iterations (t grows by one per call: no division per iteration).
  const bool periodic = options_.rebin_every > 0 && t == next_periodic_rebin_;
  if (periodic) next_periodic_rebin_ += options_.rebin_every;
  if (t >= next_rebin_ || seq_len < binned_lo_ || seq_len > binned_hi_ || periodic) {
    Rebin();
    while (next_rebin_ <= t) next_rebin_ *= 2;
  }
  if (const uint64_t key = StratumKey(iter); key != stratum_) {
    EnterStratum(key);
    SetKeepShare(iter);
  }
  Decision d;
  if (!eligible || Picks() >= allowed_) return d;
  if (StratumPreciseEnough()) return d;  // this stretch's time is as tight as asked
  int b = FindBin(seq_len);
  if (b < 0 || bin_samples_[b] >= WantedIn(static_cast<size_t>(b)) ||
      bin_samples_[b] >= options_.max_samples_per_point) {
    return d;
  }
  // Not always the first iteration a bin offers: the first of a new shape pays for
  // allocations and caches (PyTorch), and measuring it every time biased the projections up by
  // several percent. A deterministic draw (a restart replays the same decisions) skips half
  // the candidates, and an SL's first occurrence is measured only while its bin has no sample
  // yet (in the tail bins it is often the only candidate).
  // Only with a paced budget: a count budget without pacing is spent as early as the bins want.
  if (options_.per_doubling > 0) {
    const SlStats* seen = histogram_.Find(seq_len);
    if ((Mix(iter) & 1) != 0) return d;
    if (seen != nullptr && seen->count <= 1 && bin_samples_[b] > 0) return d;
  }
  const uint32_t bucket = SlHistogram::BucketIndex(seq_len);
  if (bucket >= samples_in_bucket_.size()) samples_in_bucket_.resize(bucket + 1, 0);
  const int thin = over_budget ? 1 : ThinCause(iter);
  if (thin != 0) {
    // Thinned, not deferred: the pick counts as taken (its want met, its pace slot used) but
    // is not measured, so no later iteration stands in for it. Deferring (the want kept until
    // the run's time could pay) took the next candidates instead, wherever the budget freed
    // up: a replayed run then missed its time self-check by -8.4%.
    // Thinning keeps the estimators' weights right: each cell (stratum, bin) is projected as
    // its population's time or cost (N_hb, A_hb: every iteration, measured or not) times the
    // ratio of its measured ones, and these are the design's picks less a share drawn at one
    // rate across the stratum (Uniform(iter) < keep_, set as the stratum begins), a random
    // subset of them, so every pick of the stratum is equally likely to be measured. A cell
    // left with none is projected from its stratum's level and its bin's profile, as any
    // unmeasured cell is. Only the backstop (OverheadSpent: the draw kept more than the
    // stratum's budget) thins by position; bench/cost/README.md says how often.
    ++over_budget_;
    backstopped_ += thin == 2;
    ++thinned_;
    ++bin_samples_[b];
    ++samples_in_bucket_[bucket];
    d.over_budget = true;
    return d;
  }
  if (!can_measure) {
    // Chosen, but nothing can measure it: no sample, no want met, so the bin takes its next
    // measurable candidate (an end-only iteration is no decline of a measurable one).
    ++missed_;
    d.missed = true;
    return d;
  }
  d.measure = true;
  // Groups rotate over the run's measured iterations, whatever their stratum, bin or first
  // occurrence: a collector with k groups reads each one on every k-th measurement of the run,
  // so every stretch of the run has every group (per cell, most cells would see only group 0).
  d.group = static_cast<uint32_t>(samples_.size() % std::max<uint32_t>(1, options_.counter_groups));
  ++bin_samples_[b];
  samples_.push_back({iter, seq_len, d.group});
  ++samples_in_bucket_[bucket];
  return d;
}

int OnlineSelector::ThinCause(uint64_t iter) const {
  if (options_.max_overhead <= 0 || samples_.size() < options_.overhead_floor) return 0;
  if (keep_ < 1 && Uniform(iter) >= keep_) return 1;
  // The backstop spares a stratum's first min_samples_per_stratum: every stratum is projected
  // from its own measurements, not borrowed from its neighbours (which missed by 20-43% on a
  // recorded run whose time swings between strata when whole strata went unmeasured).
  const uint64_t in_stratum = samples_.size() - measured_at_stratum_;
  return in_stratum >= options_.min_samples_per_stratum && OverheadSpent() ? 2 : 0;
}

void OnlineSelector::SetKeepShare(uint64_t iter) {
  keep_ = 1;
  stratum_budget_ns_ = 0;
  // Without a cost, a pace or windows there is no horizon to budget over: the backstop alone,
  // on the run's time so far.
  const uint64_t observed = strata_.observed();
  if (options_.max_overhead <= 0 || !(measurement_cost_ns_ > 0) || options_.per_doubling == 0 ||
      options_.window == 0 || observed == 0 || !(run_time_ns_ > 0)) {
    return;
  }
  // The stratum ends by its doubling window's end at the latest: what the run's time will pay
  // for by then (at its mean iteration time so far), less what was measured, over what the pace
  // will release by then. Spent at that rate across the stratum, by a draw, not as early as
  // the picks come (a burst of picks as a window opens would otherwise be measured first and
  // the rest thinned: thinning by position again).
  uint64_t edge = options_.window;
  while (iter >= edge && edge < (uint64_t{1} << 62)) edge *= 2;
  const uint64_t horizon = edge > iter ? edge - iter : 0;
  const double mean = run_time_ns_ / static_cast<double>(observed);
  stratum_budget_ns_ = options_.max_overhead * (run_time_ns_ + static_cast<double>(horizon) * mean);
  // At least min_samples_per_stratum of them: a stratum is projected from its own samples.
  const double affordable =
      std::max(stratum_budget_ns_ / measurement_cost_ns_ - static_cast<double>(samples_.size()),
               static_cast<double>(options_.min_samples_per_stratum));
  const uint64_t cap = cap_.Peek(histogram_.total() + horizon, bonus_);
  if (cap == UINT64_MAX || cap <= Picks()) return;
  keep_ = std::clamp(affordable / static_cast<double>(cap - Picks()), 0.0, 1.0);
}

uint64_t OnlineSelector::FindStratumKey(uint64_t iter) {
  // A count budget without pacing is spent as early as the bins want: no fresh wants per stratum.
  if (options_.per_doubling == 0) {
    key_from_ = 0;
    key_until_ = UINT64_MAX;
    key_version_ = strata_.version();
    return key_ = 0;
  }
  uint64_t window = 0, from = 0, until = UINT64_MAX;
  if (options_.window > 0) {
    uint64_t edge = options_.window;
    for (; iter >= edge && window < 63; edge *= 2) {
      ++window;
      from = edge;
    }
    until = edge;
  }
  uint64_t stratum = 0;
  if (strata_.observed() > 0) {
    uint64_t begin = 0, end = UINT64_MAX;
    stratum = strata_.StratumOf(iter, &begin, &end);
    from = std::max(from, begin);
    until = std::min(until, end);
  }
  const uint64_t key = stratum << 6 | window;
  // Past 2^62 the window edges overflow: no stretch is kept there.
  if (iter < (uint64_t{1} << 62) && from <= iter && iter < until) {
    key_ = key;
    key_from_ = from;
    key_until_ = until;
    key_version_ = strata_.version();
  }
  return key;
}

void OnlineSelector::EnterStratum(uint64_t key) {
  stratum_ = key;
  measured_at_stratum_ = samples_.size();
  thinned_at_stratum_ = thinned_;
  std::fill(samples_in_bucket_.begin(), samples_in_bucket_.end(), 0);
  std::fill(bin_samples_.begin(), bin_samples_.end(), 0);
  stratum_times_.clear();
  stratum_total_ = {};
  within_ss_ = 0;
  stratum_buckets_ = 0;
}

void OnlineSelector::OnTime(uint64_t iter, uint32_t seq_len, uint32_t batch, double time_ns) {
  const size_t changes = strata_.changes().size();
  strata_.Observe(iter, seq_len, CostProxy(seq_len, batch), time_ns);
  run_time_ns_ += time_ns;
  // Into the current stratum's times, for target_rel_error: the pooled within-SL sum of
  // squares moves by this bucket's change only (O(1)).
  const uint32_t bucket = SlHistogram::BucketIndex(seq_len);
  if (bucket >= stratum_times_.size()) stratum_times_.resize(bucket + 1);
  TimeSums& b = stratum_times_[bucket];
  if (b.n == 0) ++stratum_buckets_;
  const double before = b.n > 0 ? b.sumsq - b.sum * b.sum / b.n : 0;
  b.n += 1;
  b.sum += time_ns;
  b.sumsq += time_ns * time_ns;
  within_ss_ += (b.sumsq - b.sum * b.sum / b.n) - before;
  stratum_total_.n += 1;
  stratum_total_.sum += time_ns;
  stratum_total_.sumsq += time_ns * time_ns;
  // Re-measure after a change, within the caps: the pace alone would take a whole window.
  if (strata_.changes().size() != changes) {
    bonus_ += (strata_.changes().size() - changes) * options_.change_bonus;
    allowed_ = cap_.At(histogram_.total(), bonus_);
  }
}

Selection OnlineSelector::Current() const {
  // Bins of the whole run so far, computed aside: reading the selection must not change the
  // selector's later decisions (a restart replays the decisions and must reach the same ones).
  const std::vector<SlBucket> buckets = histogram_.Buckets();
  const std::vector<Bin> bins = BinsForTarget(buckets, options_.target_error_pct, MaxBinsNow());
  auto bin_of = [&](uint32_t seq_len) -> int {
    if (bins.empty()) return -1;
    const uint32_t bucket = SlHistogram::BucketIndex(seq_len);
    auto it = std::lower_bound(bins.begin(), bins.end(), bucket,
                               [&](const Bin& b, uint32_t x) { return buckets[b.last].index < x; });
    return it == bins.end() ? static_cast<int>(bins.size()) - 1
                            : static_cast<int>(it - bins.begin());
  };
  std::vector<PointDraft> drafts(bins.size());
  for (size_t i = 0; i < bins.size(); ++i) {
    drafts[i].bin_lo = bins[i].lo;
    drafts[i].bin_hi = bins[i].hi;
    drafts[i].weight = bins[i].count;
    drafts[i].sum_cost = bins[i].sum_cost;
    drafts[i].rep_cost = buckets[bins[i].rep].mean_cost();
  }
  std::vector<std::vector<uint32_t>> groups(bins.size());
  for (const Sample& s : samples_) {
    int b = bin_of(s.seq_len);
    if (b < 0) continue;
    drafts[b].samples.push_back({s.iter, s.seq_len});
    groups[b].push_back(s.group);
  }
  // Representative: the sample whose SL's mean cost is nearest the bin's mean cost.
  for (size_t i = 0; i < drafts.size(); ++i) {
    auto& v = drafts[i].samples;
    if (v.size() < 2) continue;
    const double mean = bins[i].mean_cost();
    auto cost_of = [&](uint32_t sl) {
      const SlStats* st = histogram_.Find(sl);
      return st && st->count ? st->sum_cost / static_cast<double>(st->count) : 0.0;
    };
    size_t best = 0;
    for (size_t j = 1; j < v.size(); ++j) {
      if (std::fabs(cost_of(v[j].seq_len) - mean) < std::fabs(cost_of(v[best].seq_len) - mean))
        best = j;
    }
    std::rotate(v.begin(), v.begin() + static_cast<long>(best),
                v.begin() + static_cast<long>(best) + 1);
    std::rotate(groups[i].begin(), groups[i].begin() + static_cast<long>(best),
                groups[i].begin() + static_cast<long>(best) + 1);
  }
  Selection sel;
  sel.iterations = histogram_.total();
  sel.method = "seqpoint-online";
  sel.budget = options_.budget_count;
  sel.proxy_error_pct = ProxyErrorPct(buckets, bins);
  sel.counter_groups = std::max<uint32_t>(1, options_.counter_groups);
  // Groups were fixed when each sample was taken; carry them over by iteration.
  std::unordered_map<uint64_t, uint32_t> group_of;
  for (size_t i = 0; i < drafts.size(); ++i) {
    for (size_t j = 0; j < drafts[i].samples.size(); ++j)
      group_of[drafts[i].samples[j].iter] = groups[i][j];
  }
  sel.points = MergeIntoPoints(std::move(drafts), 1);
  if (sel.counter_groups > 1) {
    for (auto& p : sel.points) {
      for (uint64_t it : p.iters) p.groups.push_back(group_of[it]);
    }
  }
  return sel;
}

size_t OnlineSelector::MemoryBytes() const {
  return sizeof(*this) + histogram_.MemoryBytes() + buckets_.capacity() * sizeof(SlBucket) +
         bins_.capacity() * sizeof(Bin) + bin_samples_.capacity() * sizeof(uint64_t) +
         samples_.capacity() * sizeof(Sample) + samples_in_bucket_.capacity() * sizeof(uint32_t) +
         bin_of_bucket_.capacity() * sizeof(int32_t) + want_.capacity() * sizeof(uint64_t) +
         stratum_times_.capacity() * sizeof(TimeSums) + strata_.MemoryBytes();
}

}  // namespace seqpoint::selector
