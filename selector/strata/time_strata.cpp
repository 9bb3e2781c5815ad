#include "selector/strata/time_strata.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace seqpoint::selector {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// A duration this many times what the fitted model predicts (relative to the median
// iteration) is kept out of the fit: FitModel.
constexpr double kStallFactor = 20;

// floor(log2(seq_len)); 0 for 0.
uint32_t Octave(uint32_t seq_len) {
  return seq_len == 0 ? 0 : static_cast<uint32_t>(std::bit_width(seq_len)) - 1;
}

}  // namespace

std::string_view StratumKindName(StratumKind kind) {
  switch (kind) {
    case StratumKind::kWarmup:
      return "warmup";
    case StratumKind::kSteady:
      return "steady";
    case StratumKind::kWindow:
      return "window";
    case StratumKind::kChange:
      return "change";
  }
  return "steady";
}

TimeStrata::Model TimeStrata::FitModel(const std::vector<Raw>& sorted, size_t from) {
  // Least squares over the iterations not in `skip` (empty: none skipped).
  auto fit = [&](const std::vector<bool>& skip) {
    Model m;
    double n = 0, sc = 0, st = 0, scc = 0, sct = 0;
    for (size_t i = from; i < sorted.size(); ++i) {
      const Raw& r = sorted[i];
      if (!(r.time > 0) || (!skip.empty() && skip[i])) continue;
      n += 1;
      sc += r.cost;
      st += r.time;
      scc += r.cost * r.cost;
      sct += r.cost * r.time;
    }
    if (n < 1) return m;
    const double var = scc - sc * sc / n;
    m.b = var > 1e-12 * std::max(1.0, scc) ? (sct - sc * st / n) / var : 0;
    m.a = (st - m.b * sc) / n;
    // A fit that predicts no time for some iteration (noise over a narrow SL range) is no
    // model: fall back to time proportional to cost, or to the mean time.
    double lo_cost = INFINITY;
    for (size_t i = from; i < sorted.size(); ++i) {
      if (skip.empty() || !skip[i]) lo_cost = std::min(lo_cost, sorted[i].cost);
    }
    if (m.b < 0 || m.At(lo_cost) <= 0) {
      m.a = sc > 0 ? 0 : st / n;
      m.b = sc > 0 ? st / sc : 0;
    }
    return m;
  };
  // log(time / model) of each iteration (NaN where there is none).
  auto deviations = [&](const Model& m) {
    std::vector<double> dev(sorted.size(), NAN);
    for (size_t i = from; i < sorted.size(); ++i) {
      const double want = m.At(sorted[i].cost);
      if (sorted[i].time > 0 && want > 0) dev[i] = std::log(sorted[i].time / want);
    }
    return dev;
  };
  auto kept = [&](const std::vector<double>& dev, const std::vector<bool>& skip) {
    std::vector<double> v;
    for (size_t i = from; i < dev.size(); ++i) {
      if (!std::isnan(dev[i]) && (skip.empty() || !skip[i])) v.push_back(dev[i]);
    }
    return v;
  };
  std::vector<bool> skip;
  Model m = fit(skip);
  std::vector<double> dev = deviations(m);
  double med = Median(kept(dev, skip));
  // One duration far above the others is no iteration's work: a step of the clock that timed
  // it, or a stall (a recompile, the process stopped). Least squares would follow it (one
  // clock step of a second made a whole warm-up look like steady state): it is left out of
  // the fit. A run without one is fitted exactly as before.
  for (size_t i = from; i < dev.size(); ++i) {
    if (!std::isnan(dev[i]) && dev[i] - med > std::log(kStallFactor)) {
      if (skip.empty()) skip.assign(sorted.size(), false);
      skip[i] = true;
    }
  }
  if (!skip.empty()) {
    m = fit(skip);
    dev = deviations(m);
    med = Median(kept(dev, skip));
  }
  std::vector<double> spread = kept(dev, skip);
  for (double& d : spread) d = std::fabs(d - med);
  // MAD as a standard deviation; never below 2%, so a very quiet run does not alarm on noise
  // the clock itself adds.
  m.sigma = std::max(0.02, 1.4826 * Median(spread));
  return m;
}

uint64_t TimeStrata::FindWarmup(const std::vector<Raw>& sorted) const {
  const size_t n = sorted.size();
  const size_t w = std::max<uint32_t>(2, o_.warmup_window);
  if (n < 4 * w) return 0;
  const Model m = FitModel(sorted, n / 2);
  size_t high = 0, end = 0;
  for (size_t j = 0; (j + 1) * w <= n / 2; ++j) {
    std::vector<double> r;
    for (size_t i = j * w; i < (j + 1) * w; ++i) {
      const double want = m.At(sorted[i].cost);
      if (want > 0 && sorted[i].time > 0) r.push_back(sorted[i].time / want);
    }
    if (r.empty() || Median(r) <= 1 + o_.warmup_excess) continue;
    ++high;
    if (2 * high >= j + 1) end = (j + 1) * w;
  }
  return end == 0 ? 0 : sorted[end - 1].ordinal + 1;
}

std::vector<uint64_t> TimeStrata::Boundaries(uint64_t warmup, uint64_t upto) const {
  std::vector<uint64_t> b = {0};
  if (warmup > 0) b.push_back(warmup);
  if (o_.first_window > 0) {
    for (uint64_t x = o_.first_window; x <= upto && x > 0; x *= 2) {
      if (x > warmup) b.push_back(x);
      if (x > UINT64_MAX / 2) break;
    }
  }
  b.insert(b.end(), changes_at_.begin(), changes_at_.end());
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

void TimeStrata::Observe(uint64_t ordinal, uint32_t seq_len, double cost, double time) {
  if (!std::isfinite(time) || time < 0 || !std::isfinite(cost)) return;
  ++observed_;
  max_ordinal_ = std::max(max_ordinal_, ordinal);
  const Raw r{ordinal, seq_len, cost, time};
  NoteFirst(r);
  if (!settled_) {
    // Kept in ordinal order as it arrives (out of order by a few at most: the insertion point
    // is found from the back), so the warm-up is found without sorting a copy each time.
    auto at = early_.end();
    while (at != early_.begin() && (at - 1)->ordinal > ordinal) --at;
    early_.insert(at, r);
    const uint64_t n = early_.size();
    if (n >= o_.warmup_horizon) {
      Settle();
    } else if (n >= 256 && (n & (n - 1)) == 0 && n >= 4 * FindWarmup(early_) + 64) {
      Settle();
    }
    return;
  }
  if (next_window_ > 0 && next_window_ <= max_ordinal_) ExtendBounds();
  if (o_.detect_changes && ordinal >= warmup_) Detect(r);
  Track(r);
}

void TimeStrata::NoteFirst(const Raw& r) {
  auto [it, inserted] = firsts_.try_emplace(r.seq_len, FirstOccurrence{r.ordinal, r.cost, r.time});
  if (!inserted && r.ordinal < it->second.ordinal) it->second = {r.ordinal, r.cost, r.time};
}

void TimeStrata::ExtendBounds() {
  while (next_window_ > 0 && next_window_ <= max_ordinal_) {
    if (next_window_ > warmup_ && bounds_.back() < next_window_) bounds_.push_back(next_window_);
    next_window_ = next_window_ > UINT64_MAX / 2 ? 0 : next_window_ * 2;
  }
}

void TimeStrata::Track(const Raw& r) {
  // Observations come in (nearly) ordinal order: the stratum is looked up once per stretch.
  if (r.ordinal < track_begin_ || r.ordinal >= track_end_ || bounds_.size() != track_bounds_ ||
      track_owner_ != this) {
    track_stratum_ = StratumOf(r.ordinal, &track_begin_, &track_end_);
    track_bounds_ = bounds_.size();
    track_cells_.clear();
    track_owner_ = this;
  }
  StrataCell* c = r.seq_len < track_cells_.size() ? track_cells_[r.seq_len] : nullptr;
  if (c == nullptr) {
    c = &cells_[static_cast<uint64_t>(track_stratum_) << 32 | r.seq_len];
    if (r.seq_len < kTrackedSls) {
      if (r.seq_len >= track_cells_.size()) track_cells_.resize(r.seq_len + 1, nullptr);
      track_cells_[r.seq_len] = c;
    }
  }
  AddTo(*c, r, 1);
}

void TimeStrata::AddTo(StrataCell& c, const Raw& r, double sign) {
  c.n = sign > 0 ? c.n + 1 : c.n - 1;
  c.time += sign * r.time;
  c.cost += sign * r.cost;
  if (r.cpu >= 0) {
    c.cpu_n = sign > 0 ? c.cpu_n + 1 : c.cpu_n - 1;
    c.cpu += sign * r.cpu;
    c.cpu_time += sign * r.time;
  }
}

bool TimeStrata::AddCpu(uint64_t ordinal, uint32_t seq_len, double cpu) {
  if (!std::isfinite(cpu) || cpu < 0) return false;
  auto mark = [&](Raw& e) {
    if (e.ordinal != ordinal || e.seq_len != seq_len || e.cpu >= 0) return false;
    e.cpu = cpu;
    return true;
  };
  if (!settled_) {  // early_ is in ordinal order; Cells() sums it
    auto it = std::lower_bound(early_.begin(), early_.end(), ordinal,
                               [](const Raw& e, uint64_t o) { return e.ordinal < o; });
    return it != early_.end() && mark(*it);
  }
  // The ring holds what a back-dated change may still move: its copy must carry the CPU too.
  // CPU arrives soon after the time, so the newest entries are searched first.
  Raw filed{ordinal, seq_len, 0, 0};
  bool in_ring = false;
  for (size_t k = 1; k <= ring_.size() && !in_ring; ++k) {
    Raw& e = ring_[(ring_next_ + ring_.size() - k) % ring_.size()];
    if (mark(e)) {
      in_ring = true;
      filed = e;
    }
  }
  if (!in_ring && ordinal > max_ordinal_) return false;
  auto it = cells_.find(static_cast<uint64_t>(StratumOf(ordinal)) << 32 | seq_len);
  if (it == cells_.end() || it->second.cpu_n >= it->second.n) return false;
  ++it->second.cpu_n;
  it->second.cpu += cpu;
  // Outside the ring the iteration's own time is gone: the cell's mean time stands for it.
  it->second.cpu_time += in_ring ? filed.time : it->second.time / static_cast<double>(it->second.n);
  return true;
}

void TimeStrata::Detect(const Raw& r) {
  const double want = model_.At(r.cost);
  if (!(want > 0) || !(r.time > 0)) return;
  const double x = std::log(r.time / want);
  // Kept for back-dating a change (ChangeStart, RefileFrom).
  if (ring_.size() < kChangeRing) {
    ring_.push_back(r);
  } else {
    ring_evicted_max_ = std::max(ring_evicted_max_, ring_[ring_next_].ordinal);
    ring_[ring_next_] = r;
  }
  ring_next_ = (ring_next_ + 1) % kChangeRing;
  if (Feed(0, all_, x, r)) {
    for (auto& d : by_octave_) d.reset();  // every octave saw the change: report it once
    return;
  }
  const uint32_t key = Octave(r.seq_len) + 1;
  std::optional<PageHinkley>& det = by_octave_[std::min<size_t>(key - 1, by_octave_.size() - 1)];
  if (!det) det.emplace(o_.change);
  Feed(key, *det, x, r);
}

bool TimeStrata::Feed(uint32_t key, PageHinkley& det, double x, const Raw& r) {
  const double before = det.reference();
  const int alarm = det.Add(x, model_.sigma);
  if (!pending_ratio_.empty()) {
    if (auto p = pending_ratio_.find(key); p != pending_ratio_.end() && !det.learning()) {
      changes_[p->second].ratio = std::exp(det.reference() - old_level_[key]);
      pending_ratio_.erase(p);
    }
  }
  if (alarm == 0) return false;
  OpenChange(key, alarm, before, det.since_change(), r);
  return true;
}

uint64_t TimeStrata::ChangeStart(uint32_t key, uint64_t since, const Raw& r) const {
  // The detector's last `since` observations (r the most recent) came after the extremum of
  // its sum: the change began at the earliest of them (in arrival order) that the ring holds.
  uint64_t start = r.ordinal, seen = 0;
  for (size_t k = 1; k <= ring_.size() && seen < since; ++k) {
    const Raw& e = ring_[(ring_next_ + ring_.size() - k) % ring_.size()];
    if (key != 0 && Octave(e.seq_len) + 1 != key) continue;
    start = e.ordinal;
    ++seen;
  }
  return start;
}

void TimeStrata::RefileFrom(uint64_t from) {
  // The last stratum just opened at `from`: observations already filed at or after it (all in
  // the stratum before, as `from` is past its boundary) move. The most recent ring entry is
  // the observation being detected, not filed yet.
  const auto to = static_cast<uint32_t>(bounds_.size() - 1);
  for (size_t k = 2; k <= ring_.size(); ++k) {
    const Raw& e = ring_[(ring_next_ + ring_.size() - k) % ring_.size()];
    if (e.ordinal < from) continue;
    StrataCell& old = cells_[static_cast<uint64_t>(to - 1) << 32 | e.seq_len];
    StrataCell& now = cells_[static_cast<uint64_t>(to) << 32 | e.seq_len];
    AddTo(old, e, -1);
    AddTo(now, e, 1);
  }
}

void TimeStrata::OpenChange(uint32_t key, int direction, double level_before, uint64_t since,
                            const Raw& r) {
  TimeChange c;
  // Back-dated to where the detector places the change, but never before the last boundary
  // (cells are filed by stratum index) nor before an observation the ring no longer holds.
  uint64_t earliest = std::max(warmup_, ring_evicted_max_) + 1;
  if (!changes_at_.empty()) earliest = std::max(earliest, changes_at_.back() + 1);
  const bool live = settled_ && !bounds_.empty();
  if (live) earliest = std::max(earliest, bounds_.back() + 1);
  const uint64_t latest = std::max(r.ordinal, max_ordinal_) + 1;
  c.ordinal = std::min(latest, std::max(earliest, ChangeStart(key, since, r)));
  c.direction = direction;
  if (key > 0) {
    c.sl_lo = 1u << (key - 1);
    c.sl_hi = key - 1 >= 31 ? UINT32_MAX : (1u << key) - 1;
  }
  if (changes_.size() >= o_.max_changes) return;
  changes_at_.push_back(c.ordinal);
  if (live && bounds_.back() < c.ordinal) {
    bounds_.push_back(c.ordinal);
    RefileFrom(c.ordinal);
  }
  old_level_[key] = level_before;
  pending_ratio_[key] = changes_.size();
  changes_.push_back(c);
}

void TimeStrata::Settle() {
  warmup_ = FindWarmup(early_);  // early_ is in ordinal order
  size_t from = 0;
  while (from < early_.size() && early_[from].ordinal < warmup_) ++from;
  model_ = FitModel(early_, from < early_.size() ? from : 0);
  all_ = PageHinkley(o_.change);
  settled_ = true;
  // Changes first, then cells: a change found while replaying must not renumber strata that
  // cells were already filed under.
  const uint64_t live_max = max_ordinal_;
  if (o_.detect_changes) {
    for (size_t i = from; i < early_.size(); ++i) {
      max_ordinal_ = early_[i].ordinal;
      Detect(early_[i]);
    }
  }
  max_ordinal_ = live_max;
  bounds_ = Boundaries(warmup_, max_ordinal_);
  next_window_ = o_.first_window;
  while (next_window_ > 0 && next_window_ <= max_ordinal_) {
    next_window_ = next_window_ > UINT64_MAX / 2 ? 0 : next_window_ * 2;
  }
  for (const Raw& r : early_) Track(r);
  early_.clear();
  early_.shrink_to_fit();
}

// Before the warm-up is settled, its end and the strata follow every observation: computed
// once per observation, however often the selector and the projections ask.
const std::vector<uint64_t>& TimeStrata::ProvisionalBounds() const {
  if (memo_observed_ != observed_) {
    memo_warmup_ = FindWarmup(early_);
    memo_bounds_ = Boundaries(memo_warmup_, max_ordinal_);
    memo_observed_ = observed_;
  }
  return memo_bounds_;
}

uint64_t TimeStrata::warmup_end() const {
  if (settled_) return warmup_;
  ProvisionalBounds();
  return memo_warmup_;
}

std::vector<Stratum> TimeStrata::Strata() const {
  const uint64_t w = warmup_end();
  std::vector<Stratum> out;
  for (uint64_t b : settled_ ? bounds_ : ProvisionalBounds()) {
    Stratum s{b, StratumKind::kWindow};
    if (b == 0)
      s.kind = w > 0 ? StratumKind::kWarmup : StratumKind::kSteady;
    else if (b == w)
      s.kind = StratumKind::kSteady;
    else if (std::binary_search(changes_at_.begin(), changes_at_.end(), b))
      s.kind = StratumKind::kChange;
    out.push_back(s);
  }
  return out;
}

uint32_t TimeStrata::StratumOf(uint64_t ordinal) const {
  uint64_t begin = 0, end = 0;
  return StratumOf(ordinal, &begin, &end);
}

uint32_t TimeStrata::StratumOf(uint64_t ordinal, uint64_t* begin, uint64_t* end) const {
  const std::vector<uint64_t>& b = settled_ ? bounds_ : ProvisionalBounds();
  auto it = std::upper_bound(b.begin(), b.end(), ordinal);
  *begin = *(it - 1);  // b[0] == 0
  *end = it == b.end() ? UINT64_MAX : *it;
  return static_cast<uint32_t>(it - b.begin() - 1);
}

StrataCells TimeStrata::Cells() const {
  if (settled_) {
    StrataCells out;
    for (const auto& [key, c] : cells_) {
      out[{static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key & 0xffffffffu)}] = c;
    }
    return out;
  }
  StrataCells out;
  const std::vector<uint64_t>& b = ProvisionalBounds();
  for (const Raw& r : early_) {
    const auto s =
        static_cast<uint32_t>(std::upper_bound(b.begin(), b.end(), r.ordinal) - b.begin() - 1);
    AddTo(out[{s, r.seq_len}], r, 1);
  }
  return out;
}

size_t TimeStrata::MemoryBytes() const {
  return sizeof(*this) + early_.capacity() * sizeof(Raw) + ring_.capacity() * sizeof(Raw) +
         firsts_.size() * (sizeof(FirstOccurrence) + 32) +
         cells_.size() * (sizeof(StrataCell) + 32) + track_cells_.capacity() * sizeof(StrataCell*) +
         changes_.capacity() * sizeof(TimeChange) + changes_at_.capacity() * sizeof(uint64_t);
}

}  // namespace seqpoint::selector
