#include "selector/estimate/whole_run_estimator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "selector/estimate/projection.h"
#include "selector/estimate/projection_frame.h"
#include "selector/sl_histogram.h"

namespace seqpoint::selector {
namespace {

// A stratum's mean stands for where the run's cost went only with this many iterations.
constexpr uint64_t kGapStratumMin = 8;
constexpr double kZ95 = 1.96;

const MeasuredValue* ValueOf(const EstimatorIteration& it, const std::string& metric) {
  for (const MeasuredValue& v : it.values) {
    if (v.metric == metric) return &v;
  }
  return nullptr;
}

// Adds to a projection over `observed` iterations the `unobserved` ones it does not cover: at
// the observed mean per iteration, within the factors. A gap nothing bounds (no timed
// iteration) makes the projection a floor.
void AddGap(WholeRunProjection& p, uint64_t observed, uint64_t unobserved, const GapFactors& g) {
  const double per = static_cast<double>(unobserved) / static_cast<double>(observed);
  p.gap_total = p.total * per;
  p.gap_low = g.known ? p.low * per * g.lo : 0;
  p.gap_high = g.known && p.bounded ? p.high * per * g.hi : std::numeric_limits<double>::infinity();
  if (!g.known) p.bounded = false;
  p.total += p.gap_total;
  p.low += p.gap_low;
  p.high += p.gap_high;
}

// Before any iteration is timed (probes without begin timestamps): the SeqPoint projection
// of projection.h, against the cost proxy, with no strata.
std::optional<WholeRunProjection> Unstratified(const WholeRunInput& in, const std::string& metric) {
  const Selection& sel = *in.selection;
  std::map<uint64_t, const EstimatorIteration*> by_ordinal;
  for (const EstimatorIteration& it : in.measured) by_ordinal[it.ordinal] = &it;
  std::vector<std::vector<Observation>> obs(sel.points.size());
  for (size_t p = 0; p < sel.points.size(); ++p) {
    for (uint64_t ordinal : sel.points[p].iters) {
      auto it = by_ordinal.find(ordinal);
      if (it == by_ordinal.end()) continue;
      const MeasuredValue* v = ValueOf(*it->second, metric);
      if (v != nullptr && std::isfinite(v->value)) {
        obs[p].push_back({CostProxy(it->second->seq_len, it->second->batch), v->value});
      }
    }
  }
  auto proj = ProjectMetric(sel, obs);
  if (!proj.ok() || proj->samples == 0) return std::nullopt;
  WholeRunProjection out;
  out.metric = metric;
  out.total = proj->total;
  out.low = std::max(0.0, proj->low);
  out.high = proj->high;
  out.samples = proj->samples;
  return out;
}

// One delta metric. A cheap metric's perturbed values are divided by their slowdown: by the
// ratio for the total, by the ratio's interval ends for the interval's (the correction's own
// uncertainty widens it). Other metrics cannot be corrected: marked perturbed.
std::optional<WholeRunProjection> Delta(const WholeRunInput& in, const ProjectionFrame& frame,
                                        const std::string& metric, MetricProjection* independent) {
  const bool cheap = IsCheapMetric(metric);
  bool any_slow = false;
  uint64_t with_value = 0, with_cpu = 0;
  for (const EstimatorIteration& it : in.measured) {
    any_slow |= it.slowdown.has_value();
    const MeasuredValue* v = ValueOf(it, metric);
    if (v == nullptr || !std::isfinite(v->value)) continue;
    ++with_value;
    with_cpu += it.cpu_ns >= 0;
  }
  const bool through_cpu =
      !cheap && IsCpuWorkMetric(metric) && frame.cpu_coverage() >= kMinCpuCoverage &&
      static_cast<double>(with_cpu) >= kMinCpuSampleCoverage * static_cast<double>(with_value);
  const Auxiliary aux = cheap ? Auxiliary::kCost : through_cpu ? Auxiliary::kCpu : Auxiliary::kTime;
  enum Pass { kTotal = 0, kLow = 1, kHigh = 2 };
  const int passes = cheap && any_slow ? 3 : 1;
  StratifiedProjection pass[3];
  WholeRunProjection out;
  out.metric = metric;
  for (int k = 0; k < passes; ++k) {
    std::vector<StrataSample> samples;
    for (const EstimatorIteration& it : in.measured) {
      const MeasuredValue* v = ValueOf(it, metric);
      if (v == nullptr || !std::isfinite(v->value)) continue;
      if (out.unit.empty()) out.unit = v->unit;
      double value = v->value;
      if (it.slowdown && cheap) {
        value /= k == kTotal ? it.slowdown->ratio
                 : k == kLow ? it.slowdown->high
                             : it.slowdown->low;
      } else if (it.slowdown) {
        out.perturbed = true;
      }
      samples.push_back(
          {it.ordinal, it.seq_len, CostProxy(it.seq_len, it.batch), it.time_ns, value, it.cpu_ns});
    }
    auto proj = ProjectStratified(frame, samples, aux);
    if (!proj.ok()) {
      if (k > 0 || in.strata->observed() > 0) return std::nullopt;
      auto u = Unstratified(in, metric);
      if (u) u->unit = out.unit;
      return u;
    }
    pass[k] = *proj;
  }
  // Strata hold the timed iterations; the projection is of all observed ones.
  const uint64_t observed = in.selection->iterations;
  const double scale = in.timed > 0 && observed > 0
                           ? static_cast<double>(observed) / static_cast<double>(in.timed)
                           : 1;
  const StratifiedProjection& t = pass[kTotal];
  const StratifiedProjection& lo = pass[passes == 3 ? kLow : kTotal];
  const StratifiedProjection& hi = pass[passes == 3 ? kHigh : kTotal];
  out.auxiliary = aux == Auxiliary::kCost ? "cost" : aux == Auxiliary::kCpu ? "cpu" : "time";
  out.total = t.whole.total * scale;
  out.low = lo.whole.low * scale;
  out.high = hi.whole.high * scale;
  out.steady_total = t.steady.total * scale;
  out.steady_low = lo.steady.low * scale;
  out.steady_high = hi.steady.high * scale;
  out.samples = t.whole.samples;
  out.bounded = t.bounded;
  out.strata = t.strata;
  out.borrowed = t.borrowed;
  *independent = t.independent;
  for (double* v : {&independent->total, &independent->low, &independent->high}) *v *= scale;
  return out;
}

// The physical range of a gauge by its unit: a percentage lies in [0, 100], a ratio (GPM
// activity, perf's running ratio) in [0, 1], power, clocks, memory and durations are >= 0.
// Temperatures and NVML field values ("value") have no range known here.
std::pair<double, double> GaugeRange(const std::string& unit) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (unit == "%") return {0, 100};
  if (unit == "ratio") return {0, 1};
  if (unit == "W" || unit == "MHz" || unit == "bytes" || unit == "ns") return {0, kInf};
  return {-kInf, kInf};
}

// One gauge: its integral over time projected against time like a counter, then divided by the
// time it covers: the time-weighted mean, whole run and steady state. The integral projected is
// of the reading above the lowest reading measured (value - lowest), so that the interval, which
// the projection sizes relative to what it projects (a cell nothing measured is given its own
// size as standard error), scales with how far the gauge moved, not with its level: a gauge read
// identical on every measured iteration (a memory capacity, a locked clock) has a zero-width
// interval; one that moved 0..90 % a wide one. The interval never leaves the unit's range.
std::optional<WholeRunProjection> Gauge(const WholeRunInput& in, const ProjectionFrame& frame,
                                        const std::string& metric) {
  WholeRunProjection out;
  out.metric = metric;
  out.kind = MetricKind::kGauge;
  std::vector<StrataSample> samples;
  const Selection& sel = *in.selection;
  std::vector<double> bin_vt(sel.points.size(), 0), bin_t(sel.points.size(), 0);
  std::vector<double> bin_peak(sel.points.size(), -std::numeric_limits<double>::infinity());
  std::vector<uint32_t> bin_peak_sl(sel.points.size(), 0);
  std::vector<uint64_t> bin_n(sel.points.size(), 0);
  const BinIndex bins(sel);
  double lowest = std::numeric_limits<double>::infinity();
  for (const EstimatorIteration& it : in.measured) {
    const MeasuredValue* v = ValueOf(it, metric);
    if (v == nullptr || !std::isfinite(v->value) || !(it.time_ns > 0)) continue;
    if (out.unit.empty()) out.unit = v->unit;
    out.peak = std::isnan(out.peak) ? v->value : std::max(out.peak, v->value);
    lowest = std::min(lowest, v->value);
    out.perturbed |= it.slowdown.has_value();
    samples.push_back(
        {it.ordinal, it.seq_len, CostProxy(it.seq_len, it.batch), it.time_ns, v->value});
    if (!sel.points.empty()) {
      const uint32_t b = bins.Of(it.seq_len);
      bin_vt[b] += v->value * it.time_ns;
      bin_t[b] += it.time_ns;
      if (v->value > bin_peak[b]) {
        bin_peak[b] = v->value;
        bin_peak_sl[b] = it.seq_len;
      }
      ++bin_n[b];
    }
  }
  if (samples.empty()) return std::nullopt;
  for (size_t b = 0; b < sel.points.size(); ++b) {
    if (bin_n[b] == 0) continue;
    out.bins.push_back({sel.points[b].bin_lo, sel.points[b].bin_hi, bin_vt[b] / bin_t[b],
                        bin_peak[b], bin_peak_sl[b], bin_n[b]});
  }
  if (out.peak == lowest) {  // identical readings: nothing measured moved
    out.total = out.low = out.high = lowest;
    out.steady_total = out.steady_low = out.steady_high = lowest;
    out.samples = samples.size();
    out.bounded = static_cast<double>(samples.size()) > kMinBoundedDof;
    if (!out.bounded) out.high = std::numeric_limits<double>::infinity();
    return out;
  }
  for (StrataSample& s : samples) s.value = (s.value - lowest) * s.time;
  auto proj = ProjectStratified(frame, samples, Auxiliary::kTime, /*nonnegative=*/false);
  if (!proj.ok()) return std::nullopt;
  double time_all = 0, time_steady = 0;
  const std::vector<bool>& warm = frame.impl().full.warmup;
  for (const auto& [key, c] : in.strata->Cells()) {
    time_all += c.time;
    if (key.first < warm.size() && !warm[key.first]) time_steady += c.time;
  }
  if (!(time_all > 0)) return std::nullopt;
  const auto [lo, hi] = GaugeRange(out.unit);
  auto mean = [&](double integral, double time) {
    return std::clamp(lowest + integral / time, lo, hi);
  };
  out.total = mean(proj->whole.total, time_all);
  out.low = mean(proj->whole.low, time_all);
  out.high = mean(proj->whole.high, time_all);
  if (time_steady > 0) {
    out.steady_total = mean(proj->steady.total, time_steady);
    out.steady_low = mean(proj->steady.low, time_steady);
    out.steady_high = mean(proj->steady.high, time_steady);
  }
  out.samples = proj->whole.samples;
  out.bounded = proj->whole.dof >= kMinBoundedDof && std::isfinite(proj->whole.high);
  if (!out.bounded) out.high = std::numeric_limits<double>::infinity();
  return out;
}

std::string UnreliableDetail(const WholeRunSelfCheck& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "its self-check missed: projected %+.1f%% from the total measured on every "
                "iteration, outside its 95%% interval",
                100 * c.error);
  return buf;
}

}  // namespace

bool IsCheapMetric(const std::string& metric) {
  return metric == "time_ns" || metric == "energy_uj" || metric == kProcessCpuMetric;
}

bool IsCpuWorkMetric(const std::string& metric) {
  static const char* const kNotWork[] = {"context-switches", "cs",           "cpu-migrations",
                                         "migrations",       "page-faults",  "faults",
                                         "minor-faults",     "major-faults", "alignment-faults",
                                         "emulation-faults", "running_ratio"};
  for (const char* prefix : {"perf:", "papi:"}) {
    if (metric.rfind(prefix, 0) != 0) continue;
    const std::string event = metric.substr(std::char_traits<char>::length(prefix));
    if (event.rfind("sde:", 0) == 0) return false;  // the application's own counts
    for (const char* other : kNotWork) {
      if (event == other) return false;
    }
    return !event.empty();
  }
  return false;
}

GapFactors UnobservedGapFactors(const TimeStrata& strata, uint64_t unobserved, uint64_t spread_n,
                                double spread_sum, double spread_sumsq) {
  // The run's time strata show how far the mean cost per iteration moved over the run: the
  // unobserved iterations, wherever they fell, are bounded by the lowest and highest stratum
  // mean. A sample of U iterations also varies about its stratum's mean, by the spread of one
  // iteration's time over sqrt(U).
  GapFactors f;
  if (unobserved == 0) return f;
  std::map<uint32_t, StrataCell> by_stratum;
  StrataCell all;
  for (const auto& [key, cell] : strata.Cells()) {
    StrataCell& s = by_stratum[key.first];
    s.n += cell.n;
    s.time += cell.time;
    all.n += cell.n;
    all.time += cell.time;
  }
  if (all.n == 0 || !(all.time > 0)) return f;
  const double mean = all.time / static_cast<double>(all.n);
  f.lo = f.hi = 1;
  for (const auto& [index, s] : by_stratum) {
    if (s.n < kGapStratumMin) continue;
    const double level = s.time / static_cast<double>(s.n) / mean;
    f.lo = std::min(f.lo, level);
    f.hi = std::max(f.hi, level);
  }
  double spread = 0;
  if (spread_n >= 2) {
    const double m = spread_sum / static_cast<double>(spread_n);
    const double var = std::max(0.0, spread_sumsq / static_cast<double>(spread_n) - m * m);
    spread = std::sqrt(var) / mean;
  }
  const double sampling = kZ95 * spread / std::sqrt(static_cast<double>(unobserved));
  f.lo = std::max(0.0, f.lo - sampling);
  f.hi += sampling;
  f.known = true;
  return f;
}

void SettleSelfCheck(WholeRunSelfCheck& c, double scale) {
  const double truth = c.actual - c.observer_excess;  // the run as if never measured
  auto error = [&](double projected) {
    return truth > 0 ? (projected * scale - truth) / truth : 0;
  };
  auto within = [&](double low, double high) {
    return truth >= low * scale && truth <= high * scale;
  };
  c.error = error(c.projected);
  c.within_interval = within(c.low, c.high);
  c.independent_error = error(c.independent_projected);
  c.independent_within = within(c.independent_low, c.independent_high);
  c.valid = true;
}

const WholeRunProjection* WholeRunEstimate::Find(std::string_view metric) const& {
  for (const WholeRunProjection& p : projections) {
    if (p.metric == metric) return &p;
  }
  return nullptr;
}

WholeRunEstimate EstimateWholeRun(const WholeRunInput& in) {
  WholeRunEstimate out;
  if (in.strata == nullptr || in.selection == nullptr) return out;
  const ProjectionFrame frame(*in.strata, *in.selection,
                              in.first_occurrences);  // once for every metric
  std::map<std::string, MetricKind> metrics;
  for (const EstimatorIteration& it : in.measured) {
    for (const MeasuredValue& v : it.values) metrics.emplace(v.metric, v.kind);
  }
  const GapFactors gap =
      UnobservedGapFactors(*in.strata, in.unobserved, in.spread_n, in.spread_sum, in.spread_sumsq);
  const uint64_t observed = in.selection->iterations;
  for (const auto& [metric, kind] : metrics) {
    if (kind == MetricKind::kGauge) {
      if (auto g = Gauge(in, frame, metric)) out.projections.push_back(std::move(*g));
      continue;
    }
    MetricProjection independent;
    std::optional<WholeRunProjection> p = Delta(in, frame, metric, &independent);
    if (!p) continue;
    if (auto a = in.actual.find(metric);
        a != in.actual.end() && a->second.count > 0 && observed > 0) {
      p->actual = a->second.total;
      WholeRunSelfCheck c;
      c.metric = metric;
      c.unit = p->unit;
      c.projected = p->total;
      c.low = p->low;
      c.high = p->high;
      c.actual = a->second.total;
      for (const EstimatorIteration& it : in.measured) {
        const MeasuredValue* v = ValueOf(it, metric);
        if (v == nullptr || !std::isfinite(v->value) || !it.slowdown || !(it.slowdown->ratio > 0)) {
          continue;
        }
        c.observer_excess += v->value * (1 - 1 / it.slowdown->ratio);
        c.observer_ratio = std::max(c.observer_ratio, it.slowdown->ratio);
      }
      // The honest check: the same samples on strata the checked series did not cut
      // (without strata at all, the projection's own).
      const bool has_independent = independent.samples > 0;
      c.independent_projected = has_independent ? independent.total : c.projected;
      c.independent_low = has_independent ? independent.low : c.low;
      c.independent_high = has_independent ? independent.high : c.high;
      // Per iteration that has the metric: iterations in flight, without a begin timestamp
      // or without energy do not count as error.
      SettleSelfCheck(c, static_cast<double>(a->second.count) / static_cast<double>(observed));
      // The one projection whose truth the agent knows: one that misses its own interval is a
      // promise already broken, whatever the cause (a stratum standing on one unrepresentative
      // sample, drift between the samples): flagged and left out, never printed.
      if (!c.within_interval) {
        p->unreliable = kUnreliableSelfCheck;
        p->unreliable_detail = UnreliableDetail(c);
      }
      out.self_checks.push_back(std::move(c));
    }
    // The self-checks compare like with like (the observed iterations); the whole-run total
    // also stands for the iterations never seen.
    if (in.unobserved > 0 && observed > 0) AddGap(*p, observed, in.unobserved, gap);
    out.projections.push_back(std::move(*p));
  }
  std::sort(
      out.self_checks.begin(), out.self_checks.end(),
      [](const WholeRunSelfCheck& a, const WholeRunSelfCheck& b) { return a.metric > b.metric; });
  return out;
}

}  // namespace seqpoint::selector
