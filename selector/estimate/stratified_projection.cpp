#include "selector/estimate/stratified_projection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "selector/estimate/projection_frame.h"

namespace seqpoint::selector {
namespace {

// The smallest relative variance an interval is given: 0.1% per iteration, the resolution of
// what a probe's timestamps and a counter read can tell apart. Identical samples (a saturated
// early design, a counter that repeats) then still get a width, never a point.
constexpr double kCv2Floor = 1e-6;
// What nothing measured stands on (a bin beyond every sampled cost, first occurrences none of
// which was measured) is given its own size as standard error.
constexpr double kUnknownCv2 = 1.0;
// The jackknife in time cuts the samples into this many contiguous groups; a run with fewer
// samples leaves one out at a time (from 3 samples on). A short run is where a lone sample
// stands for a whole stratum, and only leaving it out shows how much rests on it: live runs of
// 150 iterations missed their intervals by +48% and +19% with the 10-group jackknife waiting
// for 20 samples (docs/estimators.md, bench/interval_coverage.py --live).
constexpr size_t kJackknifeGroups = 10;
constexpr size_t kMinJackknifeGroups = 3;
// Residuals within cells alone set the noise only from this many degrees of freedom on. The
// selector takes a cell's samples close together in time (a budget slot opens, the next
// iterations of the bin are taken), so a few within-cell pairs see the noise between
// neighbouring iterations, not the drift across the stratum they stand for; below this the
// model's residuals are pooled in, and the larger of the two is kept.
constexpr double kTrustedWithinDof = 10;

struct Obs {
  double a = 0, y = 0, cost = 0;
  uint32_t group = 0;  // jackknife group (contiguous in time)
};

struct MCell {
  uint32_t h = 0, b = 0;
  double n = 0, aux = 0, cost = 0;  // population (0 for a sample's cell with no population)
  std::vector<Obs> obs;
};

struct FirstCell {
  uint32_t h = 0, b = 0;
  double aux = 0;
};

// One metric's samples filed into a layout's cells.
struct MetricData {
  const std::vector<bool>* warmup = nullptr;
  const std::unordered_map<uint64_t, size_t>* index = nullptr;  // (h << 32 | b) -> cells
  uint32_t bins = 0;
  std::vector<MCell> cells;
  std::vector<FirstCell> firsts;
  std::vector<std::pair<std::pair<uint32_t, uint32_t>, Obs>> first_obs;  // ((stratum, bin), sample)
  // Against time, what is smooth over bins is the value per unit of time (a rate, or a gauge's
  // reading), not the value per iteration: the cost model then fits y / a, so a bin with no
  // sample takes the rate its cost predicts, not a value over a time it was never measured at.
  bool per_aux = false;
  size_t groups = 0;  // jackknife groups the samples were cut into
};

MetricData File(const ProjectionFrame::Impl& f, bool windows,
                const std::vector<StrataSample>& samples, Auxiliary aux) {
  const Layout& l = windows ? f.windows : f.full;
  MetricData m;
  m.warmup = &l.warmup;
  m.index = &l.index;
  m.bins = std::max<uint32_t>(1, f.bins.size());
  m.per_aux = aux != Auxiliary::kCost;
  auto pop_aux = [&](const PopCell& c) {
    return aux == Auxiliary::kTime  ? c.time
           : aux == Auxiliary::kCpu ? c.CpuAll(f.cpu_per_time)
                                    : c.cost;
  };
  m.cells.reserve(l.cells.size());
  for (const PopCell& c : l.cells) {
    m.cells.push_back({c.h, c.b, c.n, std::max(0.0, pop_aux(c)), std::max(0.0, c.cost), {}});
  }
  for (const FirstPop& p : f.firsts) {
    const double a = aux == Auxiliary::kTime  ? p.time
                     : aux == Auxiliary::kCpu ? p.time * f.cpu_per_time
                                              : p.cost;
    m.firsts.push_back({windows ? p.hc : p.h, p.b, a});
  }
  // Jackknife groups: samples in ordinal order, cut into contiguous groups.
  std::vector<size_t> order(samples.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return samples[a].ordinal < samples[b].ordinal; });
  std::unordered_map<uint64_t, size_t> orphans;
  m.groups = std::min(kJackknifeGroups, order.size());
  for (size_t r = 0; r < order.size(); ++r) {
    const StrataSample& s = samples[order[r]];
    const double a = aux == Auxiliary::kTime  ? s.time
                     : aux == Auxiliary::kCpu ? (s.cpu >= 0 ? s.cpu : s.time * f.cpu_per_time)
                                              : s.cost;
    if (!(a > 0) || !std::isfinite(s.value)) continue;
    uint32_t h = f.strata->StratumOf(s.ordinal);
    if (h >= f.window_of.size()) continue;
    if (windows) h = f.window_of[h];
    const Obs o{a, s.value, s.cost, static_cast<uint32_t>(r * m.groups / order.size())};
    const uint32_t b = f.bins.Of(s.seq_len);
    if (auto fo = f.first_ordinal.find(s.seq_len);
        fo != f.first_ordinal.end() && fo->second == s.ordinal) {
      m.first_obs.push_back({{h, b}, o});
      continue;
    }
    const uint64_t key = static_cast<uint64_t>(h) << 32 | b;
    size_t at = 0;
    if (auto it = l.index.find(key); it != l.index.end()) {
      at = it->second;
    } else {
      auto [o2, inserted] = orphans.try_emplace(key, m.cells.size());
      if (inserted) m.cells.push_back({h, b, 0, 0, 0, {}});
      at = o2->second;
    }
    m.cells[at].obs.push_back(o);
  }
  return m;
}

struct Sums {
  double n = 0, sy = 0, sa = 0;
};

Sums SumOf(const std::vector<Obs>& obs, int skip) {
  Sums s;
  for (const Obs& o : obs) {
    if (static_cast<int>(o.group) == skip) continue;
    s.n += 1;
    s.sy += o.y;
    s.sa += o.a;
  }
  return s;
}

struct Estimate {
  MetricProjection p;
  uint32_t borrowed = 0;
  uint64_t first_sampled = 0;
  double population = 0;  // iterations the projection stands for
};

// The projection over the strata `in` accepts, leaving out jackknife group `skip` (-1: none).
template <typename Pred>
Estimate Project(const MetricData& m, Pred in, int skip) {
  const size_t H = m.warmup->size();
  const uint32_t B = m.bins;
  std::vector<Sums> cs(m.cells.size());
  for (size_t c = 0; c < m.cells.size(); ++c) {
    if (in(m.cells[c].h)) cs[c] = SumOf(m.cells[c].obs, skip);
  }
  // Population per bin (for a bin never sampled: its mean cost and auxiliary).
  std::vector<double> bin_n(B, 0), bin_aux(B, 0), bin_cost(B, 0), bin_samples(B, 0);
  for (size_t c = 0; c < m.cells.size(); ++c) {
    const MCell& k = m.cells[c];
    if (!in(k.h) || k.b >= B) continue;
    bin_n[k.b] += k.n;
    bin_aux[k.b] += k.aux;
    bin_cost[k.b] += k.cost;
    bin_samples[k.b] += cs[c].n;
  }
  // The two-way model ratio(h, b) = level(h) x profile(b), fitted by alternating (raking): a
  // bin measured mostly before a slowdown and one measured mostly after must not get
  // profiles that differ by the slowdown. A bin with no sample takes the run's linear cost
  // model y / level ~ alpha + beta * cost at its mean cost, over its mean auxiliary.
  std::vector<double> level(H, 1.0), profile(B, 0);
  double alpha = 0, beta = 0, reg_n = 0, reg_mx = 0, reg_sxx = 0, reg_s2 = 0;
  double reg_lo = INFINITY, reg_hi = -INFINITY;
  for (int round = 0; round < 4; ++round) {
    std::vector<double> sy(B, 0), sa(B, 0);
    double n = 0, sx = 0, sxx = 0, sxy = 0, sy1 = 0;
    for (size_t c = 0; c < m.cells.size(); ++c) {
      const MCell& k = m.cells[c];
      if (cs[c].n == 0 || k.b >= B) continue;
      const double l = level[k.h] > 0 ? level[k.h] : 1;
      sy[k.b] += cs[c].sy;
      sa[k.b] += cs[c].sa * l;
      for (const Obs& o : k.obs) {
        if (static_cast<int>(o.group) == skip) continue;
        if (m.per_aux && !(o.a > 0)) continue;
        const double y = o.y / l / (m.per_aux ? o.a : 1);
        n += 1;
        sx += o.cost;
        sxx += o.cost * o.cost;
        sxy += o.cost * y;
        sy1 += y;
        reg_lo = std::min(reg_lo, o.cost);
        reg_hi = std::max(reg_hi, o.cost);
      }
    }
    beta = 0;
    alpha = n > 0 ? sy1 / n : 0;
    const double sxx_c = n > 0 ? sxx - sx * sx / n : 0;
    if (n >= 2 && sxx_c > 0) {
      beta = (sxy - sx * sy1 / n) / sxx_c;
      alpha = (sy1 - beta * sx) / n;
    }
    reg_n = n;
    reg_mx = n > 0 ? sx / n : 0;
    reg_sxx = sxx_c;
    for (uint32_t b = 0; b < B; ++b) {
      if (sa[b] > 0) {
        profile[b] = sy[b] / sa[b];
      } else if (bin_n[b] > 0 && bin_aux[b] > 0) {
        const double fit = std::max(0.0, alpha + beta * bin_cost[b] / bin_n[b]);
        profile[b] = m.per_aux ? fit : fit / (bin_aux[b] / bin_n[b]);
      }
    }
    std::vector<double> ly(H, 0), lp(H, 0);
    for (size_t c = 0; c < m.cells.size(); ++c) {
      const MCell& k = m.cells[c];
      if (cs[c].n == 0 || k.b >= B || profile[k.b] <= 0) continue;
      ly[k.h] += cs[c].sy;
      lp[k.h] += profile[k.b] * cs[c].sa;
    }
    for (size_t h = 0; h < H; ++h) level[h] = lp[h] > 0 ? ly[h] / lp[h] : 0;
  }
  // Residuals. Within cells: e = y - R a, relative to the cell's mean value, pooled (CV^2)
  // across cells. Around the two-way model: what a saturated design (one sample per cell) has.
  double ss_w = 0, dof_w = 0, ss_m = 0, n_m = 0, n_all = 0, ss_reg = 0;
  std::vector<double> lvl_ss(H, 0), lvl_n(H, 0);
  std::vector<bool> h_sampled(H, false), b_sampled(B, false);
  for (size_t c = 0; c < m.cells.size(); ++c) {
    const MCell& k = m.cells[c];
    if (cs[c].n == 0) continue;
    n_all += cs[c].n;
    const double R = cs[c].sa > 0 ? cs[c].sy / cs[c].sa : 0;
    const double mean_y = R * cs[c].sa / cs[c].n;
    if (cs[c].n >= 2 && mean_y > 0) {
      for (const Obs& o : k.obs) {
        if (static_cast<int>(o.group) == skip) continue;
        const double e = (o.y - R * o.a) / mean_y;
        ss_w += e * e;
      }
      dof_w += cs[c].n - 1;
    }
    if (k.b >= B || profile[k.b] <= 0 || level[k.h] <= 0) continue;
    h_sampled[k.h] = true;
    b_sampled[k.b] = true;
    for (const Obs& o : k.obs) {
      if (static_cast<int>(o.group) == skip) continue;
      const double pred = level[k.h] * profile[k.b] * o.a;
      const double e = (o.y - pred) / pred;
      ss_m += e * e;
      n_m += 1;
      lvl_ss[k.h] += e * e;
      lvl_n[k.h] += 1;
      if (m.per_aux && !(o.a > 0)) continue;
      const double r = o.y / level[k.h] / (m.per_aux ? o.a : 1) - (alpha + beta * o.cost);
      ss_reg += r * r;
    }
  }
  const double params = static_cast<double>(std::count(h_sampled.begin(), h_sampled.end(), true) +
                                            std::count(b_sampled.begin(), b_sampled.end(), true)) -
                        1;
  const double dof_m = std::max(0.0, n_m - std::max(1.0, params));
  double cv2 = kUnknownCv2, dof = 0;
  if (dof_w >= kTrustedWithinDof) {
    cv2 = ss_w / dof_w;
    dof = dof_w;
  } else if (dof_w + dof_m > 0) {
    cv2 = (ss_w + ss_m) / (dof_w + dof_m);  // the model's residuals hold its misfit too
    if (dof_w > 0) cv2 = std::max(cv2, ss_w / dof_w);
    dof = dof_w + dof_m;
  }
  cv2 = std::max(cv2, kCv2Floor);
  reg_s2 = reg_n > 2 ? ss_reg / (reg_n - 2) : 0;
  // The spread of levels between strata (what borrowing a level risks).
  std::vector<double> levels;
  for (size_t h = 0; h < H; ++h) {
    if (h_sampled[h] && in(static_cast<uint32_t>(h))) levels.push_back(level[h]);
  }
  double mean_level = 0, s2_between = 0;
  for (double l : levels) mean_level += l / static_cast<double>(levels.size());
  if (levels.size() >= 2 && mean_level > 0) {
    for (double l : levels) s2_between += (l / mean_level - 1) * (l / mean_level - 1);
    s2_between /= static_cast<double>(levels.size() - 1);
  }
  // Stratum h's level, or the nearest sampled one's of the same kind (then any kind).
  auto level_of = [&](uint32_t h, bool* borrowed) -> int64_t {
    *borrowed = false;
    if (h_sampled[h]) return h;
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t d = 1; d < H; ++d) {
        for (int64_t cand : {static_cast<int64_t>(h) - static_cast<int64_t>(d),
                             static_cast<int64_t>(h) + static_cast<int64_t>(d)}) {
          if (cand < 0 || cand >= static_cast<int64_t>(H)) continue;
          const auto k = static_cast<uint32_t>(cand);
          if (!h_sampled[k] || !in(k)) continue;
          if (pass == 0 && (*m.warmup)[k] != (*m.warmup)[h]) continue;
          *borrowed = true;
          return cand;
        }
      }
    }
    return -1;
  };
  auto level_cv2 = [&](size_t h) {
    return lvl_n[h] >= 2 ? std::max(kCv2Floor, lvl_ss[h] / (lvl_n[h] - 1)) : cv2;
  };
  // The relative variance of a bin's profile where the bin has no sample of its own.
  auto profile_cv2 = [&](uint32_t b) {
    if (b_sampled[b]) return cv2 / std::max(1.0, bin_samples[b]);
    const double x0 = bin_n[b] > 0 ? bin_cost[b] / bin_n[b] : 0;
    const double y0 = alpha + beta * x0;
    // Only inside the sampled costs does the line stand for the bin: beyond, a quadratic term
    // or a cache edge nobody measured may be there.
    if (reg_n < 3 || !(y0 > 0) || x0 < reg_lo || x0 > reg_hi) return kUnknownCv2;
    const double lev = 1 / reg_n + (reg_sxx > 0 ? (x0 - reg_mx) * (x0 - reg_mx) / reg_sxx : 0);
    return std::max(kCv2Floor, reg_s2 * (1 + lev) / (y0 * y0));
  };
  Estimate out;
  double var = 0;
  std::vector<bool> counted(H, false);
  std::vector<double> cell_ratio(m.cells.size(), -1);
  for (size_t c = 0; c < m.cells.size(); ++c) {
    const MCell& k = m.cells[c];
    if (!in(k.h) || !(k.n > 0) || k.b >= B) continue;
    out.population += k.n;
    if (cs[c].n > 0) {
      const double R = cs[c].sa > 0 ? cs[c].sy / cs[c].sa : 0;
      cell_ratio[c] = R;
      out.p.total += R * k.aux;
      // A cell whose samples all read 0 still varies as the model says its cell would.
      const double scale = std::max(R, level[k.h] * profile[k.b]) * k.aux;
      const double f = std::min(1.0, cs[c].n / k.n);
      var += scale * scale * cv2 * (1 - f) / cs[c].n;
      ++out.p.points;
      continue;
    }
    bool borrowed = false;
    const int64_t lh = level_of(k.h, &borrowed);
    if (lh < 0) continue;
    const double est = level[static_cast<size_t>(lh)] * profile[k.b] * k.aux;
    cell_ratio[c] = level[static_cast<size_t>(lh)] * profile[k.b];
    out.p.total += est;
    const double n_h = std::max(1.0, lvl_n[static_cast<size_t>(lh)]);
    double rel = level_cv2(static_cast<size_t>(lh)) / n_h + cv2 / k.n + profile_cv2(k.b);
    if (borrowed) {
      rel += std::max(s2_between, level_cv2(static_cast<size_t>(lh)) / n_h);
      if (!counted[k.h]) {
        counted[k.h] = true;
        ++out.borrowed;
      }
    }
    var += est * est * rel;
  }
  // First occurrences: a first iteration costs k times a regular one of its cell (its
  // stratum's level, its bin's profile), k measured on the first occurrences sampled; with
  // none measured, k = 1 and nothing to say how much more a first iteration costs.
  auto ratio_at = [&](uint32_t h, uint32_t b) {
    const double l = h < H && h_sampled[h] ? level[h] : mean_level;
    if (b < B && l * profile[b] > 0) return l * profile[b];
    if (auto it = m.index->find(static_cast<uint64_t>(h) << 32 | b);
        it != m.index->end() && cell_ratio[it->second] >= 0) {
      return cell_ratio[it->second];
    }
    return 0.0;
  };
  Sums fs;  // sy: first values; sa: what a regular iteration of their cells would read
  for (const auto& [hb, o] : m.first_obs) {
    if (!in(hb.first) || static_cast<int>(o.group) == skip) continue;
    fs.n += 1;
    fs.sy += o.y;
    fs.sa += ratio_at(hb.first, hb.second) * o.a;
  }
  double f_n = 0, f_est = 0, f_var_unknown = 0;
  for (const FirstCell& fc : m.firsts) {
    if (!in(fc.h)) continue;
    const double e = ratio_at(fc.h, fc.b) * fc.aux;
    f_n += 1;
    f_est += e;
    f_var_unknown += e * e * kUnknownCv2;
  }
  if (fs.n > 0 && fs.sa > 0 && f_n > 0) {
    const double k = fs.sy / fs.sa;
    double f_ss = 0;
    for (const auto& [hb, o] : m.first_obs) {
      if (!in(hb.first) || static_cast<int>(o.group) == skip) continue;
      const double pred = k * ratio_at(hb.first, hb.second) * o.a;
      if (pred > 0) f_ss += (o.y - pred) / pred * (o.y - pred) / pred;
    }
    const double f_cv2 = fs.n >= 2 ? std::max(cv2, f_ss / (fs.n - 1)) : kUnknownCv2;
    out.p.total += k * f_est;
    var += k * f_est * k * f_est * f_cv2 * std::max(0.0, 1 - fs.n / f_n) / fs.n;
    out.first_sampled = static_cast<uint64_t>(fs.n);
  } else if (f_n > 0) {
    out.p.total += f_est;
    var += f_var_unknown;
  }
  out.p.samples = static_cast<uint64_t>(n_all + fs.n);
  out.population += f_n;
  out.p.dof = dof;
  const double half = TQuantile95(dof) * std::sqrt(std::max(0.0, var));
  out.p.low = out.p.total - half;
  out.p.high = out.p.total + half;
  return out;
}

// The interval widened to the delete-a-group jackknife's (groups contiguous in time): drift
// inside a stratum, a detector's delay, heavy tails and a lone sample standing for a stratum
// show there, not in the model.
template <typename Pred>
void Widen(const MetricData& m, Pred in, MetricProjection* p) {
  if (m.groups < kMinJackknifeGroups) return;
  std::vector<double> theta;
  for (size_t g = 0; g < m.groups; ++g)
    theta.push_back(Project(m, in, static_cast<int>(g)).p.total);
  double mean = 0, ss = 0;
  for (double t : theta) mean += t / static_cast<double>(theta.size());
  for (double t : theta) ss += (t - mean) * (t - mean);
  const double G = static_cast<double>(m.groups);
  const double jk_half = TQuantile95(G - 1) * std::sqrt(ss * (G - 1) / G);
  if (jk_half > (p->high - p->low) / 2) {
    p->low = p->total - jk_half;
    p->high = p->total + jk_half;
    p->dof = std::min(p->dof, G - 1);
  }
}

// A count's unseen tail. Bursts (context switches: 68-193 in a few iterations where the median
// is 16-18) that no sample caught leave the samples looking normal and the projection low, with
// an interval that does not hold (6 of 67 windows of real runs, -13% to -27%). By the rule of
// three, up to 3/n of the iterations nobody measured may lie beyond everything n samples saw; the
// high end makes room for that share of the unmeasured iterations reading as far above the
// typical sample as the highest one did. An assumption, not a bound: a tail heavier than any
// sample shows is still missed (2 of those 67 windows). Counts only (counters against time, not
// gauges), upward only (a burst adds; a count cannot go below 0).
constexpr double kRuleOfThree = 3;

void AddUnseenTail(const Estimate& e, double excess, MetricProjection* p) {
  const double n = static_cast<double>(e.p.samples);
  if (!(n > 0) || !(e.population > n) || !(excess > 0) || !(p->total > 0)) return;
  const double share = std::min(1.0, kRuleOfThree / n) * (1 - n / e.population);
  p->high += share * excess * p->total;
}

// How far above the typical sample the highest one read, per unit of the auxiliary: the
// highest rate over the median rate, less 1. Against the typical iteration, not the two-way
// model, whose cell ratio the highest sample itself pulls up. (Against each SL bin's median
// instead: 64 of 67 windows covered, not 65, and no narrower on the live runs.)
double HighestExcess(const MetricData& m) {
  std::vector<double> u;
  for (const MCell& c : m.cells) {
    for (const Obs& o : c.obs) u.push_back(o.y / o.a);
  }
  if (u.size() < 2) return 0;
  const auto mid = u.begin() + static_cast<std::ptrdiff_t>(u.size() / 2);
  std::nth_element(u.begin(), mid, u.end());
  const double median = *mid;
  const double top = *std::max_element(u.begin(), u.end());
  return median > 0 ? top / median - 1 : 0;
}

}  // namespace

Result<StratifiedProjection> ProjectStratified(const ProjectionFrame& frame,
                                               const std::vector<StrataSample>& samples,
                                               Auxiliary aux, bool nonnegative) {
  if (samples.empty()) return InvalidArgument("no measured iteration has this metric");
  const ProjectionFrame::Impl& f = frame.impl();
  const MetricData m = File(f, false, samples, aux);
  uint64_t nonzero = 0;
  double sum_u = 0, max_u = 0;
  auto count = [&](const Obs& o) {
    const double u = std::fabs(o.y / o.a);
    nonzero += u != 0;
    sum_u += u;
    max_u = std::max(max_u, u);
  };
  for (const MCell& c : m.cells) std::for_each(c.obs.begin(), c.obs.end(), count);
  for (const auto& fo : m.first_obs) count(fo.second);
  StratifiedProjection out;
  out.strata = f.full.with_iterations;
  out.first_occurrences = f.firsts.size();
  auto whole = [](uint32_t) { return true; };
  auto steady = [&m](uint32_t h) { return !(*m.warmup)[h]; };
  Estimate w = Project(m, whole, -1);
  out.whole = w.p;
  out.borrowed = w.borrowed;
  out.first_sampled = w.first_sampled;
  const Estimate st = Project(m, steady, -1);
  out.steady = st.p;
  if (out.whole.samples == 0)
    return InvalidArgument("no measured iteration has a usable time or cost");
  Widen(m, whole, &out.whole);
  Widen(m, steady, &out.steady);
  // A counter against time assumes time is work. Where time also holds waiting (a process
  // sharing the CPU steals slices from some iterations), the same samples against the cost
  // proxy tell another story: the two estimates' distance is model uncertainty the interval
  // must carry.
  if (aux == Auxiliary::kCpu) {
    // CPU time is the work itself: no waiting for the cost proxy to disagree about.
    if (nonnegative) {
      const double excess = HighestExcess(m);
      AddUnseenTail(w, excess, &out.whole);
      AddUnseenTail(st, excess, &out.steady);
    }
  } else if (aux == Auxiliary::kTime) {
    const MetricData by_cost = File(f, false, samples, Auxiliary::kCost);
    for (auto [p, alt] : {std::pair{&out.whole, Project(by_cost, whole, -1).p.total},
                          std::pair{&out.steady, Project(by_cost, steady, -1).p.total}}) {
      const double gap = std::fabs(p->total - alt);
      p->low = std::min(p->low, p->total - gap);
      p->high = std::max(p->high, p->total + gap);
    }
    if (nonnegative) {
      const double excess = HighestExcess(m);
      AddUnseenTail(w, excess, &out.whole);
      AddUnseenTail(st, excess, &out.steady);
    }
  } else {
    const MetricData win = File(f, true, samples, aux);
    out.independent = Project(win, whole, -1).p;
    Widen(win, whole, &out.independent);
    out.independent_strata = f.windows.with_iterations;
  }
  // Event-like metrics (page faults when a longer SL first arrives): too few events, or one
  // that outweighs all others, say nothing about the ones not measured; nor do too few
  // degrees of freedom say how far the total may be.
  out.bounded = nonzero >= 3 && !(out.whole.samples >= 4 && max_u > 0.5 * sum_u) &&
                out.whole.dof >= kMinBoundedDof;
  if (!out.bounded) {
    out.whole.high = out.steady.high = std::numeric_limits<double>::infinity();
  }
  if (aux == Auxiliary::kCost && (out.independent.dof < kMinBoundedDof || !out.bounded)) {
    out.independent.high = std::numeric_limits<double>::infinity();
  }
  if (nonnegative) {
    for (MetricProjection* p : {&out.whole, &out.steady, &out.independent}) {
      p->total = std::max(0.0, p->total);
      p->low = std::max(0.0, p->low);
    }
  }
  return out;
}

double ProjectionFrame::cpu_coverage() const { return impl_->cpu_coverage; }

Result<StratifiedProjection> ProjectStratified(const TimeStrata& strata, const Selection& bins,
                                               const std::vector<StrataSample>& samples,
                                               Auxiliary aux, bool nonnegative) {
  return ProjectStratified(ProjectionFrame(strata, bins), samples, aux, nonnegative);
}

}  // namespace seqpoint::selector
