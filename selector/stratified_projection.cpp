#include "selector/stratified_projection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace seqpoint::selector {
namespace {

// SL -> index of the bin holding it (nearest bin for SLs between or outside bins).
class BinIndex {
 public:
  explicit BinIndex(const Selection& sel) {
    for (const SeqPoint& p : sel.points) ranges_.push_back({p.bin_lo, p.bin_hi});
    std::sort(ranges_.begin(), ranges_.end());
  }
  uint32_t Of(uint32_t seq_len) const {
    if (ranges_.empty()) return 0;
    auto it = std::lower_bound(ranges_.begin(), ranges_.end(), seq_len,
                               [](const std::pair<uint32_t, uint32_t>& r, uint32_t sl) {
                                 return r.second < sl;
                               });
    if (it == ranges_.end()) return static_cast<uint32_t>(ranges_.size() - 1);
    return static_cast<uint32_t>(it - ranges_.begin());
  }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

struct Cell {
  uint64_t n_all = 0;  // iterations
  double aux = 0;      // their summed auxiliary
  double cost = 0;     // their summed cost proxy
  double sy = 0, sa = 0;
  std::vector<double> u;  // y / a of each sample
  std::vector<std::pair<double, double>> xy;  // (cost, y) of each sample
};

struct StratumSums {
  double sy = 0, sa = 0;
  std::vector<double> u;
  bool warmup = false;
  bool has_iterations = false;
};

double Ratio(double sy, double sa) { return sa > 0 ? sy / sa : 0; }

double Variance(const std::vector<double>& u, double mean) {
  if (u.size() < 2) return 0;
  double s = 0;
  for (double x : u) s += (x - mean) * (x - mean);
  return s / static_cast<double>(u.size() - 1);
}

// The ratio profile of each bin over the selected strata (bins hold different SLs: a short SL
// costs more per unit of cost proxy, its fixed overhead weighs more). A bin without samples
// takes the run's linear cost model y ~ alpha + beta * cost at its mean cost, over its mean
// auxiliary (the regression estimator the offline projection uses for such bins).
template <typename Pred>
std::vector<double> BinProfiles(const std::map<std::pair<uint32_t, uint32_t>, Cell>& cells,
                                Pred in, const std::vector<double>& level) {
  uint32_t bins = 0;
  for (const auto& [key, c] : cells) bins = std::max(bins, key.second + 1);
  std::vector<double> sy(bins, 0), sa(bins, 0), n_all(bins, 0), aux(bins, 0), cost(bins, 0);
  double n = 0, sx = 0, sxx = 0, sxy = 0, syy = 0;
  for (const auto& [key, c] : cells) {
    if (!in(key.first)) continue;
    const double l = key.first < level.size() && level[key.first] > 0 ? level[key.first] : 1;
    sy[key.second] += c.sy;
    sa[key.second] += c.sa * l;
    n_all[key.second] += static_cast<double>(c.n_all);
    aux[key.second] += c.aux;
    cost[key.second] += c.cost;
    for (const auto& [x, y0] : c.xy) {
      const double y = y0 / l;
      n += 1;
      sx += x;
      sxx += x * x;
      sxy += x * y;
      syy += y;
    }
  }
  double beta = 0, alpha = n > 0 ? syy / n : 0;
  if (n >= 2 && sxx - sx * sx / n > 0) {
    beta = (sxy - sx * syy / n) / (sxx - sx * sx / n);
    alpha = (syy - beta * sx) / n;
  }
  std::vector<double> profile(bins, 0);
  for (uint32_t b = 0; b < bins; ++b) {
    if (sa[b] > 0) {
      profile[b] = sy[b] / sa[b];
    } else if (n_all[b] > 0 && aux[b] > 0) {
      const double mean_cost = cost[b] / n_all[b], mean_aux = aux[b] / n_all[b];
      profile[b] = std::max(0.0, alpha + beta * mean_cost) / mean_aux;
    }
  }
  return profile;
}

// One projection over the strata `in` selects. A cell with samples: its own ratio. A cell
// without: level(stratum) x profile(bin), the level the stratum's samples show relative to
// their bins' profiles, borrowed from the nearest stratum of the same kind when it has none.
template <typename Pred>
MetricProjection Estimate(const std::map<std::pair<uint32_t, uint32_t>, Cell>& cells,
                          const std::vector<StratumSums>& strata, Pred in, uint32_t* borrowed) {
  // The two-way model ratio(h, b) = level(h) x profile(b), fitted by alternating the two
  // (raking): a bin measured mostly before a slowdown and one measured mostly after must not
  // get profiles that differ by the slowdown.
  std::vector<double> rake(strata.size(), 1.0);
  std::vector<double> profile;
  for (int round = 0; round < 4; ++round) {
    profile = BinProfiles(cells, in, rake);
    std::vector<double> sy(strata.size(), 0), sp(strata.size(), 0);
    for (const auto& [key, c] : cells) {
      if (!in(key.first) || c.u.empty() || profile[key.second] <= 0) continue;
      sy[key.first] += c.sy;
      sp[key.first] += profile[key.second] * c.sa;
    }
    for (size_t h = 0; h < strata.size(); ++h) rake[h] = sp[h] > 0 ? sy[h] / sp[h] : 1;
  }
  // Pooled within-cell variance of the per-unit ratio; each stratum's level and the spread of
  // its samples around level x profile.
  double ss_within = 0, dof_within = 0, n_samples = 0;
  struct Level {
    double sy = 0, sp = 0;  // sum y, sum profile x aux
    std::vector<double> v;  // (y / aux) / profile of each sample
    double level() const { return sp > 0 ? sy / sp : 0; }
  };
  std::vector<Level> levels(strata.size());
  for (const auto& [key, c] : cells) {
    if (!in(key.first) || c.u.empty()) continue;
    const double r = Ratio(c.sy, c.sa);
    for (double x : c.u) ss_within += (x - r) * (x - r);
    dof_within += static_cast<double>(c.u.size() - 1);
    n_samples += static_cast<double>(c.u.size());
    const double p = profile[key.second];
    if (p <= 0) continue;
    Level& l = levels[key.first];
    l.sy += c.sy;
    l.sp += p * c.sa;
    for (double x : c.u) l.v.push_back(x / p);
  }
  std::vector<double> level_values;
  double ss_level = 0, n_level = 0;
  for (size_t h = 0; h < levels.size(); ++h) {
    if (!in(static_cast<uint32_t>(h)) || levels[h].v.empty()) continue;
    level_values.push_back(levels[h].level());
    for (double x : levels[h].v) ss_level += (x - levels[h].level()) * (x - levels[h].level());
    n_level += static_cast<double>(levels[h].v.size());
  }
  const double s2_within = dof_within > 0 ? ss_within / dof_within : 0;
  const double s2_level = n_level > 1 ? ss_level / (n_level - 1) : 0;
  double mean_level = 0;
  for (double l : level_values) mean_level += l;
  if (!level_values.empty()) mean_level /= static_cast<double>(level_values.size());
  const double s2_between = Variance(level_values, mean_level);

  // Stratum h's level, or the nearest one's of the same kind (then any kind).
  auto level_of = [&](uint32_t h, bool* from_other) -> const Level* {
    *from_other = false;
    if (!levels[h].v.empty()) return &levels[h];
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t d = 1; d < strata.size(); ++d) {
        for (int64_t cand : {static_cast<int64_t>(h) - static_cast<int64_t>(d),
                             static_cast<int64_t>(h) + static_cast<int64_t>(d)}) {
          if (cand < 0 || cand >= static_cast<int64_t>(strata.size())) continue;
          const Level& l = levels[static_cast<size_t>(cand)];
          if (!in(static_cast<uint32_t>(cand)) || l.v.empty()) continue;
          if (pass == 0 && strata[static_cast<size_t>(cand)].warmup != strata[h].warmup) continue;
          *from_other = true;
          return &l;
        }
      }
    }
    return nullptr;
  };

  MetricProjection out;
  double var = 0;
  std::vector<bool> counted(strata.size(), false);
  for (const auto& [key, c] : cells) {
    const uint32_t h = key.first;
    if (!in(h) || c.n_all == 0) continue;
    if (!c.u.empty()) {
      out.total += Ratio(c.sy, c.sa) * c.aux;
      const double n = static_cast<double>(c.u.size());
      const double f = std::min(1.0, n / static_cast<double>(c.n_all));
      const double s2 = s2_within > 0 ? s2_within : s2_level * profile[key.second] * profile[key.second];
      var += c.aux * c.aux * s2 / n * (1 - f);
      ++out.points;
      continue;
    }
    bool from_other = false;
    const Level* l = level_of(h, &from_other);
    if (l == nullptr) continue;
    const double p = profile[key.second];
    const double scale = p * c.aux;
    out.total += l->level() * scale;
    const double n_h = static_cast<double>(l->v.size());
    // The level stands for a cell it did not measure: its own noise, plus how much cells
    // (and, when borrowed, strata) differ.
    const double s2_h = n_h > 1 ? Variance(l->v, l->level()) : s2_level;
    var += scale * scale * (s2_h / std::max(1.0, n_h) + s2_h / static_cast<double>(c.n_all));
    if (from_other) {
      var += scale * scale * std::max(s2_between, s2_h / std::max(1.0, n_h));
      if (!counted[h]) {
        counted[h] = true;
        ++*borrowed;
      }
    }
  }
  out.samples = static_cast<uint64_t>(n_samples);
  out.dof = std::max(1.0, dof_within > 0 ? dof_within : n_samples - 1);
  const double half = TQuantile95(out.dof) * std::sqrt(std::max(0.0, var));
  out.low = out.total - half;
  out.high = out.total + half;
  return out;
}

}  // namespace

namespace {

struct Built {
  std::map<std::pair<uint32_t, uint32_t>, Cell> cells;
  std::vector<StratumSums> sums;
};

// Cells and strata with every iteration's totals and the samples whose index `use` accepts.
template <typename Use>
Built Build(const TimeStrata& strata, const std::vector<Stratum>& list, const StrataCells& all,
            const BinIndex& bin_of, const std::vector<StrataSample>& samples, Auxiliary aux,
            Use use) {
  Built b;
  b.sums.resize(list.size());
  for (size_t h = 0; h < list.size(); ++h) b.sums[h].warmup = list[h].kind == StratumKind::kWarmup;
  for (const auto& [key, sc] : all) {
    if (key.first >= b.sums.size()) continue;
    Cell& c = b.cells[{key.first, bin_of.Of(key.second)}];
    c.n_all += sc.n;
    c.aux += aux == Auxiliary::kTime ? sc.time : sc.cost;
    c.cost += sc.cost;
    b.sums[key.first].has_iterations = true;
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    const StrataSample& s = samples[i];
    const double a = aux == Auxiliary::kTime ? s.time : s.cost;
    if (!use(i) || !(a > 0) || !std::isfinite(s.value)) continue;
    const uint32_t h = strata.StratumOf(s.ordinal);
    if (h >= b.sums.size()) continue;
    Cell& c = b.cells[{h, bin_of.Of(s.seq_len)}];
    c.sy += s.value;
    c.sa += a;
    c.u.push_back(s.value / a);
    c.xy.emplace_back(s.cost, s.value);
    b.sums[h].sy += s.value;
    b.sums[h].sa += a;
    b.sums[h].u.push_back(s.value / a);
  }
  return b;
}

// Delete-a-group jackknife over samples in contiguous groups of time: how much the estimate
// moves when a stretch of the run's measurements is left out. It sees what the within-cell
// model does not: drift inside a stratum, a detector's delay, heavy tails.
template <typename Pred>
double JackknifeVariance(const TimeStrata& strata, const std::vector<Stratum>& list,
                         const StrataCells& all, const BinIndex& bin_of,
                         const std::vector<StrataSample>& samples, Auxiliary aux, Pred in,
                         size_t groups) {
  if (samples.size() < 2 * groups) return 0;
  std::vector<size_t> order(samples.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return samples[a].ordinal < samples[b].ordinal; });
  std::vector<size_t> group_of(samples.size());
  for (size_t r = 0; r < order.size(); ++r) group_of[order[r]] = r * groups / order.size();
  std::vector<double> theta;
  for (size_t g = 0; g < groups; ++g) {
    Built b = Build(strata, list, all, bin_of, samples, aux,
                    [&](size_t i) { return group_of[i] != g; });
    uint32_t borrowed = 0;
    theta.push_back(Estimate(b.cells, b.sums, [&](uint32_t h) { return in(b.sums, h); },
                             &borrowed).total);
  }
  double mean = 0;
  for (double t : theta) mean += t;
  mean /= static_cast<double>(groups);
  double ss = 0;
  for (double t : theta) ss += (t - mean) * (t - mean);
  return ss * static_cast<double>(groups - 1) / static_cast<double>(groups);
}

}  // namespace

Result<StratifiedProjection> ProjectStratified(const TimeStrata& strata, const Selection& bins,
                                               const std::vector<StrataSample>& samples,
                                               Auxiliary aux, bool nonnegative) {
  if (samples.empty()) return InvalidArgument("no measured iteration has this metric");
  const BinIndex bin_of(bins);
  const std::vector<Stratum> list = strata.Strata();
  const StrataCells all = strata.Cells();
  Built b = Build(strata, list, all, bin_of, samples, aux, [](size_t) { return true; });
  uint64_t nonzero = 0;
  double sum_u = 0, max_u = 0;
  for (const auto& [key, c] : b.cells) {
    for (double u : c.u) {
      nonzero += u != 0;
      sum_u += std::fabs(u);
      max_u = std::max(max_u, std::fabs(u));
    }
  }
  StratifiedProjection out;
  for (const StratumSums& s : b.sums) out.strata += s.has_iterations;
  auto whole = [](const std::vector<StratumSums>&, uint32_t) { return true; };
  auto steady = [](const std::vector<StratumSums>& sums, uint32_t h) { return !sums[h].warmup; };
  uint32_t borrowed_whole = 0, borrowed_steady = 0;
  out.whole = Estimate(b.cells, b.sums, [&](uint32_t h) { return whole(b.sums, h); }, &borrowed_whole);
  out.steady = Estimate(b.cells, b.sums, [&](uint32_t h) { return steady(b.sums, h); }, &borrowed_steady);
  out.borrowed = borrowed_whole;
  if (out.whole.samples == 0) return InvalidArgument("no measured iteration has a usable time or cost");
  // The interval is the wider of the model's and the jackknife's (10 groups in time; its
  // degrees of freedom then bound the t quantile).
  constexpr size_t kGroups = 10;
  auto widen = [&](MetricProjection& p, auto pred) {
    const double jk = JackknifeVariance(strata, list, all, bin_of, samples, aux, pred, kGroups);
    const double model_half = (p.high - p.low) / 2;
    const double jk_half = TQuantile95(static_cast<double>(kGroups - 1)) * std::sqrt(jk);
    if (jk_half > model_half) {
      p.low = p.total - jk_half;
      p.high = p.total + jk_half;
      p.dof = std::min(p.dof, static_cast<double>(kGroups - 1));
    }
  };
  widen(out.whole, whole);
  widen(out.steady, steady);
  // A counter against time assumes time is work. Where time also holds waiting (a process
  // sharing the CPU steals slices from some iterations), the same samples against the cost
  // proxy tell another story: the two estimates' distance is model uncertainty the interval
  // must carry.
  if (aux == Auxiliary::kTime) {
    Built by_cost = Build(strata, list, all, bin_of, samples, Auxiliary::kCost,
                          [](size_t) { return true; });
    uint32_t unused = 0;
    const double alt_whole = Estimate(by_cost.cells, by_cost.sums,
                                      [&](uint32_t h) { return whole(by_cost.sums, h); }, &unused).total;
    const double alt_steady = Estimate(by_cost.cells, by_cost.sums,
                                       [&](uint32_t h) { return steady(by_cost.sums, h); }, &unused).total;
    for (auto [p, alt] : {std::pair{&out.whole, alt_whole}, std::pair{&out.steady, alt_steady}}) {
      const double gap = std::fabs(p->total - alt);
      p->low = std::min(p->low, p->total - gap);
      p->high = std::max(p->high, p->total + gap);
    }
  }
  // Event-like metrics (page faults when a longer SL first arrives): too few events, or one
  // that outweighs all others, say nothing about the ones not measured.
  out.bounded = nonzero >= 3 && !(out.whole.samples >= 4 && max_u > 0.5 * sum_u);
  if (!out.bounded) {
    out.whole.high = out.steady.high = std::numeric_limits<double>::infinity();
  }
  if (nonnegative) {
    for (MetricProjection* p : {&out.whole, &out.steady}) {
      p->total = std::max(0.0, p->total);
      p->low = std::max(0.0, p->low);
    }
  }
  return out;
}

}  // namespace seqpoint::selector
