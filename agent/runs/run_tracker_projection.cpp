// RunTracker's projections, self-checks and observer-effect estimate (run_tracker.h): the
// part recomputed when /metrics, `seqpoint show` or a flush asks, at most once a second.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "agent/runs/run_tracker.h"
#include "selector/projection.h"
#include "selector/stratified_projection.h"

namespace seqpoint::daemon {
namespace {

// A whole-run total is meaningful for quantities that add up over iterations (time, energy,
// counts); a gauge (power, clock, temperature, utilisation, perf's running ratio) does not add,
// so it is not projected as a total.
bool Additive(const std::string& unit) {
  return unit != "ratio" && unit != "%" && unit != "W" && unit != "MHz" && unit != "C";
}

// The cheap metrics, known on every iteration: corrected for the observer effect.
bool Cheap(const std::string& metric) { return metric == "time_ns" || metric == "energy_uj"; }

// A stratum's mean stands for where the run's cost went only with this many iterations.
constexpr uint64_t kGapStratumMin = 8;
constexpr double kZ95 = 1.96;

// Adds to a projection over `observed` iterations the `unobserved` ones it does not cover: at
// the observed mean per iteration, within the factors (docs/estimators.md, "Unobserved
// iterations"). A gap nothing bounds (no timed iteration) makes the projection a floor.
void AddGap(Projection& p, uint64_t observed, uint64_t unobserved, double lo, double hi,
            bool known) {
  const double per = static_cast<double>(unobserved) / static_cast<double>(observed);
  p.gap_total = p.total * per;
  p.gap_low = known ? p.low * per * lo : 0;
  p.gap_high = known && p.bounded ? p.high * per * hi : std::numeric_limits<double>::infinity();
  if (!known) p.bounded = false;
  p.total += p.gap_total;
  p.low += p.gap_low;
  p.high += p.gap_high;
}

}  // namespace

const ObserverEffect& RunTracker::observer_effect(double threshold) {
  if (threshold != observer_threshold_) {
    observer_threshold_ = threshold;
    observer_dirty_ = true;
  }
  if (!observer_dirty_) return observer_;
  std::vector<MeasuredTiming> timings;
  timings.reserve(measured_.size());
  for (const auto& [ordinal, mi] : measured_) {
    MeasuredTiming t;
    t.ordinal = ordinal;
    t.pid = mi.pid;
    t.seq_len = mi.seq_len;
    for (const collectors::Sample& v : mi.values) {
      if (v.name == "time_ns") t.time_ns = v.value;
      if (v.name == "observer:control") t.control = true;
      if (v.name.rfind("group:", 0) == 0) {
        t.groups.push_back(GroupKey(v.name.substr(6), static_cast<uint64_t>(v.value)));
      }
    }
    timings.push_back(std::move(t));
  }
  std::vector<ObserverPair> pairs = PairControls(std::move(timings), [this](uint32_t sl) {
    auto it = histogram_.find(sl);
    return it == histogram_.end() || it->second.count == 0
               ? 0.0
               : it->second.time_ns_sum / static_cast<double>(it->second.count);
  });
  observer_ = EstimateObserverEffect(pairs, observer_threshold_);
  // A flag raised on valid evidence stays raised for the run: the estimate is remade as SL
  // means move and pairs arrive (and a dropped collector adds no pairs), but a slowdown once
  // shown does not un-happen, nor do the collectors dropped for it come back.
  if (observer_.all.flagged) observer_latched_.insert("");
  for (const ObserverEstimate& e : observer_.by_group) {
    if (e.flagged) observer_latched_.insert(e.group);
  }
  observer_.all.flagged = observer_latched_.count("") > 0;
  for (ObserverEstimate& e : observer_.by_group) e.flagged = observer_latched_.count(e.group) > 0;
  observer_.flagged = !observer_latched_.empty();
  observer_dirty_ = false;
  ++observer_generation_;
  dirty_ = true;  // the perturbed marks may change
  return observer_;
}

void RunTracker::Recompute(int64_t now_ns) {
  // Current() re-bins, which would steer the selector's later decisions by when /metrics or a
  // flush happened to ask; on a copy, the live selector sees only OnIteration calls, so a
  // restart's replay of the log rebuilds it exactly.
  selector::OnlineSelector view = selector_;
  selector::Selection sel = view.Current();
  seqpoints_.clear();
  for (const selector::SeqPoint& p : sel.points) {
    SeqPointRecord r;
    for (uint64_t ordinal : p.iters) {
      auto id = sample_ids_.find(ordinal);
      if (id == sample_ids_.end()) continue;
      r.pids.push_back(id->second.first);
      r.iters.push_back(id->second.second);
    }
    r.iter = r.iters.empty() ? 0 : r.iters.front();
    r.seq_len = p.seq_len;
    r.weight = static_cast<double>(p.weight);
    r.bin_lo = p.bin_lo;
    r.bin_hi = p.bin_hi;
    seqpoints_.push_back(std::move(r));
  }
  // Current, for the corrections and marks: the SL means that pair ratios are taken relative
  // to have moved since the last measured iteration.
  observer_dirty_ = true;
  (void)observer_effect(observer_threshold_);
  std::map<std::string, std::string> metrics;  // name -> unit
  for (const auto& [ordinal, mi] : measured_) {
    for (const collectors::Sample& v : mi.values) {
      if (Additive(v.unit) && !IsBookkeepingMetric(v.name)) metrics.emplace(v.name, v.unit);
    }
  }
  projections_.clear();
  self_checks_.clear();
  const GapFactors gap = UnobservedGapFactors();
  for (const auto& [metric, unit] : metrics) {
    std::optional<Projection> out = ProjectOne(sel, metric, unit);
    if (!out) continue;
    if (metric == "time_ns" && timed_iterations_ > 0 && sel.iterations > 0) {
      out->actual = actual_time_ns_;
      CheckCheapMetric(*out, timed_iterations_, sel.iterations);
    }
    if (metric == "energy_uj" && energy_iterations_ > 0 && sel.iterations > 0) {
      out->actual = actual_energy_uj_;
      CheckCheapMetric(*out, energy_iterations_, sel.iterations);
    }
    // The self-checks compare like with like (the observed iterations); the whole-run total
    // also stands for the iterations never seen.
    if (record_.unobserved > 0 && sel.iterations > 0) {
      AddGap(*out, sel.iterations, record_.unobserved, gap.lo, gap.hi, gap.known);
    }
    projections_.push_back(std::move(*out));
  }
  // Time first.
  std::sort(self_checks_.begin(), self_checks_.end(),
            [](const SelfCheck& a, const SelfCheck& b) { return a.metric > b.metric; });
  computed_at_ns_ = now_ns;
  dirty_ = false;
}

std::optional<Projection> RunTracker::ProjectOne(const selector::Selection& sel,
                                                 const std::string& metric,
                                                 const std::string& unit) {
  // Estimated by time strata (selector/stratified_projection.h): a cheap metric from the
  // measured iterations alone against the cost proxy (the self-check of the SeqPoints), a
  // collector metric against every iteration's time (counter ~ rate x time).
  // A perturbed value of a cheap metric is divided by its slowdown: by the ratio for the
  // total, by the ratio's interval ends for the interval's (the correction's own uncertainty
  // widens it). Collector metrics cannot be corrected: their projection is marked perturbed.
  enum Pass { kTotal = 0, kLow = 1, kHigh = 2 };
  selector::StratifiedProjection pass[3];
  bool perturbed = false;
  const int passes = Cheap(metric) && observer_.flagged ? 3 : 1;
  const auto aux = Cheap(metric) ? selector::Auxiliary::kCost : selector::Auxiliary::kTime;
  for (int k = 0; k < passes; ++k) {
    std::vector<selector::StrataSample> samples;
    for (const auto& [ordinal, mi] : measured_) {
      std::optional<double> value;
      double time = 0;
      std::vector<std::string> groups;
      bool control = false;
      for (const collectors::Sample& v : mi.values) {
        if (v.name == metric) value = v.value;
        if (v.name == "time_ns") time = v.value;
        if (v.name == "observer:control") control = true;
        if (v.name.rfind("group:", 0) == 0) {
          groups.push_back(GroupKey(v.name.substr(6), static_cast<uint64_t>(v.value)));
        }
      }
      if (!value || !std::isfinite(*value)) continue;
      const ObserverEstimate* slow = control ? nullptr : observer_.SlowdownOf(groups);
      if (slow != nullptr && Cheap(metric)) {
        *value /= k == kTotal ? slow->ratio : k == kLow ? slow->high : slow->low;
      } else if (slow != nullptr) {
        perturbed = true;
      }
      samples.push_back({ordinal, mi.seq_len, selector::CostProxy(mi.seq_len, mi.batch), time,
                         *value});
    }
    auto proj = selector::ProjectStratified(selector_.strata(), sel, samples, aux);
    if (!proj.ok()) {
      // No time strata yet (no iteration timed): the SeqPoint projection without them.
      if (k > 0 || selector_.strata().observed() > 0) return std::nullopt;
      return ProjectUnstratified(sel, metric, unit);
    }
    pass[k] = *proj;
  }
  // Strata hold the timed iterations; the projection is of all observed ones.
  double scale = 1;
  if (timed_iterations_ > 0 && sel.iterations > 0) {
    scale = static_cast<double>(sel.iterations) / static_cast<double>(timed_iterations_);
  }
  const selector::StratifiedProjection& t = pass[kTotal];
  const selector::StratifiedProjection& lo = pass[passes == 3 ? kLow : kTotal];
  const selector::StratifiedProjection& hi = pass[passes == 3 ? kHigh : kTotal];
  Projection out{metric,
                 unit,
                 t.whole.total * scale,
                 lo.whole.low * scale,
                 hi.whole.high * scale,
                 std::numeric_limits<double>::quiet_NaN(),
                 t.whole.samples,
                 perturbed};
  out.steady_total = t.steady.total * scale;
  out.steady_low = lo.steady.low * scale;
  out.steady_high = hi.steady.high * scale;
  out.bounded = t.bounded;
  return out;
}

// Before any iteration is timed (probes without begin timestamps): the SeqPoint projection of
// selector/projection.h, against the cost proxy, with no strata.
std::optional<Projection> RunTracker::ProjectUnstratified(const selector::Selection& sel,
                                                          const std::string& metric,
                                                          const std::string& unit) {
  std::vector<std::vector<selector::Observation>> obs(sel.points.size());
  for (size_t p = 0; p < sel.points.size(); ++p) {
    for (uint64_t ordinal : sel.points[p].iters) {
      auto it = measured_.find(ordinal);
      if (it == measured_.end()) continue;
      for (const collectors::Sample& v : it->second.values) {
        if (v.name == metric && std::isfinite(v.value)) {
          obs[p].push_back({selector::CostProxy(it->second.seq_len, it->second.batch), v.value});
        }
      }
    }
  }
  auto proj = selector::ProjectMetric(sel, obs);
  if (!proj.ok() || proj->samples == 0) return std::nullopt;
  Projection out{metric, unit, proj->total, std::max(0.0, proj->low), proj->high,
                 std::numeric_limits<double>::quiet_NaN(), proj->samples, false};
  return out;
}

// The run's time strata (warm-up, windows, changes) show how far the mean cost per iteration
// moved over the run: the unobserved iterations, wherever they fell, are bounded by the lowest
// and highest stratum mean. A sample of U iterations also varies about its stratum's mean, by
// the spread of one iteration's time over sqrt(U).
RunTracker::GapFactors RunTracker::UnobservedGapFactors() const {
  GapFactors f;
  if (record_.unobserved == 0) return f;  // nothing to bound: skip copying the cells
  std::map<uint32_t, selector::StrataCell> by_stratum;
  selector::StrataCell all;
  for (const auto& [key, cell] : selector_.strata().Cells()) {
    selector::StrataCell& s = by_stratum[key.first];
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
  if (spread_n_ >= 2) {
    const double m = spread_sum_ / static_cast<double>(spread_n_);
    const double var = std::max(0.0, spread_sumsq_ / static_cast<double>(spread_n_) - m * m);
    spread = std::sqrt(var) / mean;
  }
  const double sampling = kZ95 * spread / std::sqrt(static_cast<double>(record_.unobserved));
  f.lo = std::max(0.0, f.lo - sampling);
  f.hi += sampling;
  f.known = true;
  return f;
}

void RunTracker::CheckCheapMetric(const Projection& proj, uint64_t count, uint64_t iterations) {
  SelfCheck c;
  c.metric = proj.metric;
  c.unit = proj.unit;
  c.projected = proj.total;
  c.low = proj.low;
  c.high = proj.high;
  c.actual = proj.actual;
  if (observer_.flagged) {
    for (const auto& [ordinal, mi] : measured_) {
      std::optional<double> value;
      std::vector<std::string> groups;
      bool control = false;
      for (const collectors::Sample& v : mi.values) {
        if (v.name == proj.metric) value = v.value;
        if (v.name == "observer:control") control = true;
        if (v.name.rfind("group:", 0) == 0) {
          groups.push_back(GroupKey(v.name.substr(6), static_cast<uint64_t>(v.value)));
        }
      }
      const ObserverEstimate* slow = control ? nullptr : observer_.SlowdownOf(groups);
      if (!value || slow == nullptr || !(slow->ratio > 0)) continue;
      c.observer_excess += *value * (1 - 1 / slow->ratio);
      c.observer_ratio = std::max(c.observer_ratio, slow->ratio);
    }
  }
  // Per iteration that has the metric, so that iterations in flight, without a begin
  // timestamp or without energy do not count as error.
  const double scale = static_cast<double>(count) / static_cast<double>(iterations);
  const double expected = proj.total * scale;
  const double unobserved = c.actual - c.observer_excess;  // the run as if never measured
  c.error = unobserved > 0 ? (expected - unobserved) / unobserved : 0;
  c.within_interval = unobserved >= proj.low * scale && unobserved <= proj.high * scale;
  c.valid = true;
  self_checks_.push_back(std::move(c));
}

// A stored run's observer effect, rebuilt from its measurement rows and histogram.
ObserverEffect StoredObserverEffect(const RunSnapshot& s,
                                    const std::vector<Measurement>& measurements,
                                    double threshold) {
  std::map<uint32_t, double> ref;
  for (const HistogramBin& b : s.histogram) {
    if (b.count) ref[b.seq_len] = b.time_ns_sum / static_cast<double>(b.count);
  }
  auto pairs = PairControls(TimingsFrom(measurements), [&ref](uint32_t sl) {
    auto it = ref.find(sl);
    return it == ref.end() ? 0.0 : it->second;
  });
  return EstimateObserverEffect(pairs, threshold);
}

// A stored run's self-checks, rebuilt from its projections (stored already corrected for the
// observer effect), histogram and measurements.
std::vector<SelfCheck> StoredSelfChecks(const RunSnapshot& s,
                                        const std::vector<Measurement>& measurements,
                                        const ObserverEffect& oe) {
  std::vector<SelfCheck> out;
  std::map<uint64_t, MeasuredTiming> timings;
  for (MeasuredTiming& t : TimingsFrom(measurements)) timings[t.ordinal] = std::move(t);
  for (const std::string metric : {"time_ns", "energy_uj"}) {
    for (const Projection& p : s.projections) {
      if (p.metric != metric || !std::isfinite(p.actual) || p.actual <= 0) continue;
      SelfCheck c;
      c.metric = p.metric;
      c.unit = p.unit;
      // Like the live check: the observed iterations only, without the unobserved gap.
      c.projected = p.total - p.gap_total;
      c.low = p.low - p.gap_low;
      c.high = std::isfinite(p.gap_high) ? p.high - p.gap_high : p.high;
      c.actual = p.actual;
      for (const Measurement& m : measurements) {
        auto t = timings.find(m.ordinal);
        if (m.metric != metric || t == timings.end() || t->second.control) continue;
        const ObserverEstimate* slow = oe.SlowdownOf(t->second.groups);
        if (slow == nullptr || !(slow->ratio > 0)) continue;
        c.observer_excess += m.value * (1 - 1 / slow->ratio);
        c.observer_ratio = std::max(c.observer_ratio, slow->ratio);
      }
      // Closed runs have no iteration in flight; energy covers only the iterations it was
      // attributed to.
      double scale = 1;
      if (metric == "energy_uj") {
        uint64_t with = 0, all = 0;
        for (const HistogramBin& b : s.histogram) {
          with += b.energy_count;
          all += b.count;
        }
        scale = all ? static_cast<double>(with) / static_cast<double>(all) : 1;
      }
      const double unobserved = c.actual - c.observer_excess;
      c.error = unobserved > 0 ? (c.projected * scale - unobserved) / unobserved : 0;
      c.within_interval = unobserved >= c.low * scale && unobserved <= c.high * scale;
      c.valid = true;
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace seqpoint::daemon
