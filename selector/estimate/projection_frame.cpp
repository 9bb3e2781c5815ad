// ProjectionFrame: the population cells, aggregated once per recompute (projection_frame.h).
#include "selector/estimate/projection_frame.h"

#include <algorithm>

namespace seqpoint::selector {

BinIndex::BinIndex(const Selection& sel) {
  for (const SeqPoint& p : sel.points) ranges_.push_back({p.bin_lo, p.bin_hi});
  std::sort(ranges_.begin(), ranges_.end());
}

uint32_t BinIndex::Of(uint32_t seq_len) const {
  if (ranges_.empty()) return 0;
  auto it = std::lower_bound(
      ranges_.begin(), ranges_.end(), seq_len,
      [](const std::pair<uint32_t, uint32_t>& r, uint32_t sl) { return r.second < sl; });
  if (it == ranges_.end()) return static_cast<uint32_t>(ranges_.size() - 1);
  return static_cast<uint32_t>(it - ranges_.begin());
}

namespace {

PopCell& CellOf(Layout& l, uint32_t h, uint32_t b) {
  const uint64_t key = static_cast<uint64_t>(h) << 32 | b;
  auto [it, inserted] = l.index.try_emplace(key, l.cells.size());
  if (inserted) l.cells.push_back({h, b, 0, 0, 0, 0, 0, 0});
  return l.cells[it->second];
}

}  // namespace

ProjectionFrame::ProjectionFrame(const TimeStrata& strata, const Selection& bins,
                                 bool first_occurrences)
    : impl_(std::make_unique<Impl>(bins)) {
  Impl& f = *impl_;
  f.strata = &strata;
  const std::vector<Stratum> list = strata.Strata();
  f.full.warmup.resize(list.size());
  f.window_of.resize(list.size());
  // Window-only strata: the boundaries at doubling windows, none where time moved (the
  // warm-up's end, a change): a coarsening of the time strata, so cells merge exactly.
  uint32_t w = 0;
  for (size_t h = 0; h < list.size(); ++h) {
    f.full.warmup[h] = list[h].kind == StratumKind::kWarmup;
    if (h > 0 && list[h].kind == StratumKind::kWindow) ++w;
    f.window_of[h] = w;
  }
  f.windows.warmup.assign(w + 1, false);
  std::vector<bool> full_used(list.size(), false), window_used(w + 1, false);
  for (const auto& [key, sc] : strata.Cells()) {
    if (key.first >= list.size() || sc.n == 0) continue;
    const uint32_t b = f.bins.Of(key.second);
    for (auto [layout, h] :
         {std::pair{&f.full, key.first}, std::pair{&f.windows, f.window_of[key.first]}}) {
      PopCell& c = CellOf(*layout, h, b);
      c.n += static_cast<double>(sc.n);
      c.time += sc.time;
      c.cost += sc.cost;
      c.cpu_n += static_cast<double>(sc.cpu_n);
      c.cpu += sc.cpu;
      c.cpu_time += sc.cpu_time;
    }
    full_used[key.first] = true;
    window_used[f.window_of[key.first]] = true;
  }
  double n = 0, cpu_n = 0, cpu = 0, cpu_time = 0;
  for (const PopCell& c : f.full.cells) {
    n += c.n;
    cpu_n += c.cpu_n;
    cpu += c.cpu;
    cpu_time += c.cpu_time;
  }
  f.cpu_coverage = n > 0 ? cpu_n / n : 0;
  f.cpu_per_time = cpu_time > 0 ? cpu / cpu_time : 0;
  f.full.with_iterations =
      static_cast<uint32_t>(std::count(full_used.begin(), full_used.end(), true));
  f.windows.with_iterations =
      static_cast<uint32_t>(std::count(window_used.begin(), window_used.end(), true));
  // First occurrences out of their cells, into their own post-stratum.
  if (!first_occurrences) return;
  for (const auto& [sl, first] : strata.FirstOccurrences()) {
    const uint32_t h = strata.StratumOf(first.ordinal);
    if (h >= list.size()) continue;
    const uint32_t b = f.bins.Of(sl);
    auto it = f.full.index.find(static_cast<uint64_t>(h) << 32 | b);
    if (it == f.full.index.end() || f.full.cells[it->second].n < 1) continue;
    const uint32_t hc = f.window_of[h];
    for (PopCell* c : {&f.full.cells[it->second],
                       &f.windows.cells[f.windows.index.at(static_cast<uint64_t>(hc) << 32 | b)]}) {
      c->n -= 1;
      c->time -= first.time;
      c->cost -= first.cost;
    }
    f.firsts.push_back({h, hc, b, first.time, first.cost});
    f.first_ordinal[sl] = first.ordinal;
  }
}

ProjectionFrame::~ProjectionFrame() = default;
ProjectionFrame::ProjectionFrame(ProjectionFrame&&) noexcept = default;

}  // namespace seqpoint::selector
