// The online selector's state as bytes and back (state_codec.h): every field that a later
// decision, stratum or change alarm depends on, so that a selector loaded from a checkpoint
// and fed the same iterations decides, stratifies and alarms exactly as the one that wrote it.
// Options are not stored: they come from the configuration, as they do for a replayed log.
// Caches and memos (the budget cap, wants per bin, stratum keys, TimeStrata's provisional
// bounds and tracked stratum) are reset and recomputed, not stored. A field added to the state
// of these classes must be added here: selector_checkpoint_test.cpp compares the decisions and
// images of a loaded selector with the original's.
#include <algorithm>

#include "selector/online_selector.h"

namespace seqpoint::selector {
namespace {

void PutStats(StateWriter& w, const SlStats& s) {
  w.Put(s.count);
  w.Put(s.eligible);
  w.Put(s.sum_cost);
  w.Put(s.sum_cost2);
  w.Put(s.sum_tokens);
}

bool GetStats(StateReader& r, SlStats* s) {
  return r.Get(&s->count) && r.Get(&s->eligible) && r.Get(&s->sum_cost) && r.Get(&s->sum_cost2) &&
         r.Get(&s->sum_tokens);
}

// A vector of plain numbers.
template <typename T>
void PutNumbers(StateWriter& w, const std::vector<T>& v) {
  w.PutAll(v, [](StateWriter& o, T x) { o.Put(x); });
}

template <typename T>
bool GetNumbers(StateReader& r, std::vector<T>* v) {
  uint64_t n = 0;
  if (!r.Count(&n, sizeof(T))) return false;
  v->resize(n);
  for (T& x : *v) {
    if (!r.Get(&x)) return false;
  }
  return true;
}

}  // namespace

void SlHistogram::SaveState(StateWriter& w) const {
  // Sparse: the dense array is mostly empty below the largest SL seen.
  w.Put<uint64_t>(buckets_.size());
  w.Put<uint64_t>(distinct_);
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (buckets_[i].count == 0) continue;
    w.Put<uint32_t>(static_cast<uint32_t>(i));
    PutStats(w, buckets_[i]);
  }
  w.Put(total_);
  w.Put(total_cost_);
}

bool SlHistogram::LoadState(StateReader& r) {
  uint64_t size = 0, nonempty = 0;
  if (!r.Get(&size) || !r.Get(&nonempty) || size > kMaxBuckets || nonempty > size) return false;
  buckets_.assign(size, SlStats{});
  distinct_ = 0;
  for (uint64_t k = 0; k < nonempty; ++k) {
    uint32_t i = 0;
    if (!r.Get(&i) || i >= size || !GetStats(r, &buckets_[i])) return false;
    ++distinct_;
  }
  return r.Get(&total_) && r.Get(&total_cost_);
}

void PageHinkley::SaveState(StateWriter& w) const {
  w.Put<uint8_t>(learning_ ? 1 : 0);
  PutNumbers(w, window_);
  for (double v : {ref_, up_, up_min_, down_, down_max_}) w.Put(v);
  for (uint64_t v : {n_, up_min_at_, down_max_at_, since_change_}) w.Put(v);
}

bool PageHinkley::LoadState(StateReader& r) {
  uint8_t learning = 0;
  if (!r.Get(&learning) || !GetNumbers(r, &window_)) return false;
  learning_ = learning != 0;
  for (double* v : {&ref_, &up_, &up_min_, &down_, &down_max_}) {
    if (!r.Get(v)) return false;
  }
  for (uint64_t* v : {&n_, &up_min_at_, &down_max_at_, &since_change_}) {
    if (!r.Get(v)) return false;
  }
  return true;
}

bool TimeStrata::LoadCpu(StateReader& r) {
  uint8_t any = 0;
  if (!r.Get(&any)) return false;
  if (any == 0) return true;  // none: every CPU time unknown, as loaded
  uint64_t n = 0;
  if (!r.Count(&n, 8) || n != early_.size()) return false;
  for (Raw& e : early_) {
    if (!r.Get(&e.cpu)) return false;
  }
  // The cells in the key order SaveState wrote them.
  std::vector<uint64_t> keys;
  for (const auto& kv : cells_) keys.push_back(kv.first);
  std::sort(keys.begin(), keys.end());
  if (!r.Count(&n, 24) || n != keys.size()) return false;
  for (uint64_t key : keys) {
    StrataCell& c = cells_[key];
    if (!r.Get(&c.cpu_n) || !r.Get(&c.cpu) || !r.Get(&c.cpu_time)) return false;
  }
  // The ring was read back in arrival order from index 0.
  if (!r.Count(&n, 8) || n != ring_.size()) return false;
  for (Raw& e : ring_) {
    if (!r.Get(&e.cpu)) return false;
  }
  return true;
}

void TimeStrata::SaveState(StateWriter& w) const {
  w.Put(observed_);
  w.Put<uint8_t>(settled_ ? 1 : 0);
  w.PutAll(early_, [](StateWriter& o, const Raw& e) {
    o.Put(e.ordinal);
    o.Put(e.seq_len);
    o.Put(e.cost);
    o.Put(e.time);
  });
  w.Put(warmup_);
  for (double v : {model_.a, model_.b, model_.sigma}) w.Put(v);
  PutNumbers(w, changes_at_);
  w.PutAll(changes_, [](StateWriter& o, const TimeChange& c) {
    o.Put(c.ordinal);
    o.Put(c.sl_lo);
    o.Put(c.sl_hi);
    o.Put<int32_t>(c.direction);
    o.Put(c.ratio);
  });
  w.Put(max_ordinal_);
  // The cells in key order: an unordered_map's order is not the same twice.
  std::vector<std::pair<uint64_t, StrataCell>> cells(cells_.begin(), cells_.end());
  std::sort(cells.begin(), cells.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  w.PutAll(cells, [](StateWriter& o, const std::pair<uint64_t, StrataCell>& c) {
    o.Put(c.first);
    o.Put(c.second.n);
    o.Put(c.second.time);
    o.Put(c.second.cost);
  });
  PutNumbers(w, bounds_);
  w.Put(next_window_);
  all_.SaveState(w);
  for (const auto& ph : by_octave_) {
    w.Put<uint8_t>(ph ? 1 : 0);
    if (ph) ph->SaveState(w);
  }
  w.PutAll(pending_ratio_, [](StateWriter& o, const auto& kv) {
    o.Put(kv.first);
    o.Put<uint64_t>(kv.second);
  });
  w.PutAll(old_level_, [](StateWriter& o, const auto& kv) {
    o.Put(kv.first);
    o.Put(kv.second);
  });
  // Version 2: the ring in arrival order, then the first occurrences by SL.
  std::vector<Raw> ring;
  for (size_t k = ring_.size(); k >= 1; --k)
    ring.push_back(ring_[(ring_next_ + ring_.size() - k) % ring_.size()]);
  w.PutAll(ring, [](StateWriter& o, const Raw& e) {
    o.Put(e.ordinal);
    o.Put(e.seq_len);
    o.Put(e.cost);
    o.Put(e.time);
  });
  w.Put(ring_evicted_max_);
  std::vector<std::pair<uint32_t, FirstOccurrence>> firsts(firsts_.begin(), firsts_.end());
  std::sort(firsts.begin(), firsts.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  w.PutAll(firsts, [](StateWriter& o, const std::pair<uint32_t, FirstOccurrence>& f) {
    o.Put(f.first);
    o.Put(f.second.ordinal);
    o.Put(f.second.cost);
    o.Put(f.second.time);
  });
  // Version 5: the process CPU time of the kept observations and the cells' CPU sums, in the
  // orders written above; one byte when no iteration has one (a replayed run: the image stays
  // as small as it was).
  const bool any_cpu =
      std::any_of(early_.begin(), early_.end(), [](const Raw& e) { return e.cpu >= 0; }) ||
      std::any_of(cells.begin(), cells.end(), [](const auto& c) { return c.second.cpu_n > 0; });
  w.Put<uint8_t>(any_cpu ? 1 : 0);
  if (!any_cpu) return;
  w.PutAll(early_, [](StateWriter& o, const Raw& e) { o.Put(e.cpu); });
  w.PutAll(cells, [](StateWriter& o, const std::pair<uint64_t, StrataCell>& c) {
    o.Put(c.second.cpu_n);
    o.Put(c.second.cpu);
    o.Put(c.second.cpu_time);
  });
  w.PutAll(ring, [](StateWriter& o, const Raw& e) { o.Put(e.cpu); });
}

bool TimeStrata::LoadState(StateReader& r) {
  uint8_t settled = 0;
  uint64_t n = 0;
  if (!r.Get(&observed_) || !r.Get(&settled) || !r.Count(&n, 24)) return false;
  settled_ = settled != 0;
  early_.assign(n, Raw{0, 0, 0, 0});
  for (Raw& e : early_) {
    if (!r.Get(&e.ordinal) || !r.Get(&e.seq_len) || !r.Get(&e.cost) || !r.Get(&e.time)) {
      return false;
    }
  }
  if (!r.Get(&warmup_) || !r.Get(&model_.a) || !r.Get(&model_.b) || !r.Get(&model_.sigma) ||
      !GetNumbers(r, &changes_at_) || !r.Count(&n, 28)) {
    return false;
  }
  changes_.resize(n);
  for (TimeChange& c : changes_) {
    int32_t direction = 0;
    if (!r.Get(&c.ordinal) || !r.Get(&c.sl_lo) || !r.Get(&c.sl_hi) || !r.Get(&direction) ||
        !r.Get(&c.ratio)) {
      return false;
    }
    c.direction = direction;
  }
  if (!r.Get(&max_ordinal_) || !r.Count(&n, 32)) return false;
  cells_.clear();
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t key = 0;
    StrataCell c;
    if (!r.Get(&key) || !r.Get(&c.n) || !r.Get(&c.time) || !r.Get(&c.cost)) return false;
    cells_[key] = c;
  }
  if (!GetNumbers(r, &bounds_) || !r.Get(&next_window_) || !all_.LoadState(r)) return false;
  for (auto& ph : by_octave_) {
    uint8_t present = 0;
    if (!r.Get(&present)) return false;
    ph.reset();
    if (present != 0 && !ph.emplace(o_.change).LoadState(r)) return false;
  }
  if (!r.Count(&n, 12)) return false;
  pending_ratio_.clear();
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t key = 0;
    uint64_t index = 0;
    if (!r.Get(&key) || !r.Get(&index)) return false;
    pending_ratio_[key] = index;
  }
  if (!r.Count(&n, 12)) return false;
  old_level_.clear();
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t key = 0;
    double level = 0;
    if (!r.Get(&key) || !r.Get(&level)) return false;
    old_level_[key] = level;
  }
  ring_.clear();
  ring_next_ = 0;
  ring_evicted_max_ = 0;
  firsts_.clear();
  if (r.version >= 2) {
    if (!r.Count(&n, 28) || n > kChangeRing) return false;
    ring_.assign(n, Raw{0, 0, 0, 0});
    for (Raw& e : ring_) {
      if (!r.Get(&e.ordinal) || !r.Get(&e.seq_len) || !r.Get(&e.cost) || !r.Get(&e.time))
        return false;
    }
    ring_next_ = n % kChangeRing;
    if (!r.Get(&ring_evicted_max_) || !r.Count(&n, 28)) return false;
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t sl = 0;
      FirstOccurrence f;
      if (!r.Get(&sl) || !r.Get(&f.ordinal) || !r.Get(&f.cost) || !r.Get(&f.time)) return false;
      firsts_[sl] = f;
    }
  }
  // Older images: no iteration has a process CPU time (the estimator falls back to time).
  if (r.version >= 5 && !LoadCpu(r)) return false;
  memo_observed_ = UINT64_MAX;  // the provisional bounds are recomputed when asked for
  track_begin_ = 1;
  track_end_ = 0;
  track_bounds_ = 0;
  return true;
}

void OnlineSelector::SaveState(StateWriter& w) const {
  histogram_.SaveState(w);
  w.PutAll(buckets_, [](StateWriter& o, const SlBucket& b) {
    o.Put(b.lo);
    o.Put(b.hi);
    o.Put(b.index);
    PutStats(o, b.stats);
  });
  w.PutAll(bins_, [](StateWriter& o, const Bin& b) {
    for (uint32_t v : {b.lo, b.hi, b.first, b.last, b.rep}) o.Put(v);
    o.Put(b.count);
    o.Put(b.eligible);
    o.Put(b.sum_cost);
    o.Put(b.sum_cost2);
  });
  PutNumbers(w, bin_samples_);
  w.Put(binned_cost_);
  w.PutAll(samples_, [](StateWriter& o, const Sample& s) {
    o.Put(s.iter);
    o.Put(s.seq_len);
    o.Put(s.group);
  });
  PutNumbers(w, samples_in_bucket_);
  strata_.SaveState(w);
  for (uint64_t v :
       {stratum_, measured_at_stratum_, bonus_, next_rebin_, next_periodic_rebin_, rebins_}) {
    w.Put(v);
  }
  PutNumbers(w, bin_of_bucket_);
  w.Put(binned_lo_);
  w.Put(binned_hi_);
  // Version 3: the current stratum's times (target_rel_error) and the run's time.
  w.PutAll(stratum_times_, [](StateWriter& o, const TimeSums& t) {
    for (double v : {t.n, t.sum, t.sumsq}) o.Put(v);
  });
  for (double v :
       {stratum_total_.n, stratum_total_.sum, stratum_total_.sumsq, within_ss_, run_time_ns_}) {
    w.Put(v);
  }
  // Version 4: picks thinned by the overhead budget, and the current stratum's keep share.
  w.Put(thinned_);
  w.Put(thinned_at_stratum_);
  w.Put(keep_);
  w.Put(stratum_budget_ns_);
}

bool OnlineSelector::LoadState(StateReader& r) {
  uint64_t n = 0;
  if (!histogram_.LoadState(r) || !r.Count(&n, 52)) return false;
  buckets_.resize(n);
  for (SlBucket& b : buckets_) {
    if (!r.Get(&b.lo) || !r.Get(&b.hi) || !r.Get(&b.index) || !GetStats(r, &b.stats)) return false;
  }
  if (!r.Count(&n, 52)) return false;
  bins_.resize(n);
  for (Bin& b : bins_) {
    for (uint32_t* v : {&b.lo, &b.hi, &b.first, &b.last, &b.rep}) {
      if (!r.Get(v)) return false;
    }
    if (!r.Get(&b.count) || !r.Get(&b.eligible) || !r.Get(&b.sum_cost) || !r.Get(&b.sum_cost2)) {
      return false;
    }
  }
  if (!GetNumbers(r, &bin_samples_) || !r.Get(&binned_cost_) || !r.Count(&n, 16)) return false;
  samples_.resize(n);
  for (Sample& s : samples_) {
    if (!r.Get(&s.iter) || !r.Get(&s.seq_len) || !r.Get(&s.group)) return false;
  }
  if (!GetNumbers(r, &samples_in_bucket_) || !strata_.LoadState(r)) return false;
  for (uint64_t* v :
       {&stratum_, &measured_at_stratum_, &bonus_, &next_rebin_, &next_periodic_rebin_, &rebins_}) {
    if (!r.Get(v)) return false;
  }
  if (!GetNumbers(r, &bin_of_bucket_) || !r.Get(&binned_lo_) || !r.Get(&binned_hi_)) return false;
  stratum_times_.clear();
  stratum_total_ = {};
  within_ss_ = run_time_ns_ = 0;
  stratum_buckets_ = 0;
  if (r.version >= 3) {  // older images: the stratum's times start afresh (target_rel_error)
    if (!r.Count(&n, 24)) return false;
    stratum_times_.resize(n);
    for (TimeSums& t : stratum_times_) {
      if (!r.Get(&t.n) || !r.Get(&t.sum) || !r.Get(&t.sumsq)) return false;
      stratum_buckets_ += t.n > 0;
    }
    for (double* v : {&stratum_total_.n, &stratum_total_.sum, &stratum_total_.sumsq, &within_ss_,
                      &run_time_ns_}) {
      if (!r.Get(v)) return false;
    }
  }
  thinned_ = thinned_at_stratum_ = 0;
  keep_ = 1;
  stratum_budget_ns_ = 0;
  if (r.version >= 4) {  // older images: nothing was thinned (the budget deferred instead)
    if (!r.Get(&thinned_) || !r.Get(&thinned_at_stratum_) || !r.Get(&keep_) ||
        !r.Get(&stratum_budget_ns_)) {
      return false;
    }
    if (thinned_at_stratum_ > thinned_ || !(keep_ >= 0 && keep_ <= 1)) return false;
  }
  // Indices the decisions follow must stay inside their tables.
  if (bin_samples_.size() != bins_.size()) return false;
  for (int32_t b : bin_of_bucket_) {
    if (b >= static_cast<int32_t>(bins_.size())) return false;
  }
  for (const Bin& b : bins_) {
    if (b.first > b.last || b.last >= buckets_.size() || b.rep >= buckets_.size()) return false;
  }
  allowed_ = cap_.At(histogram_.total(), bonus_);
  want_.assign(bins_.size(), 0);
  want_budget_ = UINT64_MAX;
  key_from_ = 1;
  key_until_ = 0;
  key_version_ = 0;
  return true;
}

std::string OnlineSelector::Checkpoint() const {
  StateWriter w;
  w.Put(kStateMagic);
  w.Put(kStateVersion);
  SaveState(w);
  return w.Take();
}

Status OnlineSelector::LoadCheckpoint(std::string_view image) {
  StateReader r(image);
  uint32_t magic = 0, version = 0;
  if (!r.Get(&magic) || magic != kStateMagic) {
    return InvalidArgument("selector checkpoint: not a checkpoint image");
  }
  if (!r.Get(&version) || version < kOldestStateVersion || version > kStateVersion) {
    return Unsupported("selector checkpoint: layout version " + std::to_string(version) +
                       ", this build reads " + std::to_string(kOldestStateVersion) + " to " +
                       std::to_string(kStateVersion));
  }
  r.version = version;
  if (!LoadState(r) || !r.done()) {
    return InvalidArgument("selector checkpoint: truncated or inconsistent image (" +
                           std::to_string(image.size()) + " bytes)");
  }
  return Status::Ok();
}

}  // namespace seqpoint::selector
