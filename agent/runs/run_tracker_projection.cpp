// RunTracker's projections, self-checks and observer-effect estimate (run_tracker.h): the
// part recomputed when /metrics, `seqpoint show` or a flush asks, at most once a second. The
// estimation itself is selector/estimate/whole_run_estimator.h (the one `seqpoint evaluate
// --online` runs too); this file only turns the tracker's state into its input and its output
// into the store's rows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "agent/runs/run_tracker.h"
#include "selector/estimate/whole_run_estimator.h"

namespace seqpoint::daemon {
namespace {

// A sample's kind as the estimator needs it. Collectors say it (collectors::Sample::kind); a
// unit that can only be a reading makes a gauge too, so that a collector that forgot to say
// is never summed into a nonsense total.
selector::MetricKind KindOf(const collectors::Sample& v) {
  if (v.kind == collectors::SampleKind::kGauge) return selector::MetricKind::kGauge;
  for (const char* unit : {"ratio", "%", "W", "MHz", "C"}) {
    if (v.unit == unit) return selector::MetricKind::kGauge;
  }
  return selector::MetricKind::kDelta;
}

std::vector<std::string> GroupKeys(const std::vector<CounterGroup>& groups) {
  std::vector<std::string> keys;
  for (const CounterGroup& g : groups) keys.push_back(GroupKey(g.collector, g.group));
  return keys;
}

Projection ToProjection(const selector::WholeRunProjection& p) {
  Projection out{p.metric, p.unit, p.total, p.low, p.high, p.actual, p.samples, p.perturbed};
  out.steady_total = p.steady_total;
  out.steady_low = p.steady_low;
  out.steady_high = p.steady_high;
  out.bounded = p.bounded;
  out.gap_total = p.gap_total;
  out.gap_low = p.gap_low;
  out.gap_high = p.gap_high;
  out.kind = static_cast<uint8_t>(p.kind);
  out.peak = p.peak;
  out.left_out = p.unreliable;
  out.left_out_detail = p.unreliable_detail;
  for (const selector::BinMean& b : p.bins) {
    out.bins.push_back({b.bin_lo, b.bin_hi, b.mean, b.peak, b.peak_seq_len, b.samples});
  }
  return out;
}

// The exported self-check is the one on strata the checked series did not cut (honest); the
// one on the run's time strata is what the projection itself uses.
SelfCheck ToSelfCheck(const selector::WholeRunSelfCheck& c) {
  SelfCheck out;
  out.metric = c.metric;
  out.unit = c.unit;
  out.projected = c.independent_projected;
  out.low = c.independent_low;
  out.high = c.independent_high;
  out.actual = c.actual;
  out.observer_excess = c.observer_excess;
  out.observer_ratio = c.observer_ratio;
  out.error = c.independent_error;
  out.within_interval = c.independent_within;
  out.valid = c.valid;
  return out;
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
    t.control = mi.control;
    t.groups = GroupKeys(mi.groups);
    for (const collectors::Sample& v : mi.values) {
      if (v.name == "time_ns") t.time_ns = v.value;
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
  // Current() is const: reading the selection never steers later decisions, and needs no copy
  // of the selector.
  const selector::Selection sel = selector_.Current();
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
  selector::WholeRunInput in;
  in.strata = &selector_.strata();
  in.selection = &sel;
  in.timed = timed_iterations_;
  in.unobserved = record_.unobserved;
  in.spread_n = spread_n_;
  in.spread_sum = spread_sum_;
  in.spread_sumsq = spread_sumsq_;
  if (timed_iterations_ > 0) in.actual["time_ns"] = {timed_iterations_, actual_time_ns_};
  if (energy_iterations_ > 0) in.actual["energy_uj"] = {energy_iterations_, actual_energy_uj_};
  if (cpu_iterations_ > 0) {
    in.actual[selector::kProcessCpuMetric] = {cpu_iterations_, actual_cpu_ns_};
  }
  in.measured.reserve(measured_.size());
  for (const auto& [ordinal, mi] : measured_) {
    selector::EstimatorIteration it;
    it.ordinal = ordinal;
    it.seq_len = mi.seq_len;
    it.batch = mi.batch;
    if (!mi.control) {
      if (const ObserverEstimate* slow = observer_.SlowdownOf(GroupKeys(mi.groups))) {
        it.slowdown = selector::Slowdown{slow->ratio, slow->low, slow->high};
      }
    }
    for (const collectors::Sample& v : mi.values) {
      if (v.name == "time_ns") it.time_ns = v.value;
      if (v.name == selector::kProcessCpuMetric) it.cpu_ns = v.value;  // the CPU counters' aux
      if (IsBookkeepingMetric(v.name)) continue;
      it.values.push_back({v.name, v.unit, v.value, KindOf(v)});
    }
    in.measured.push_back(std::move(it));
  }
  const selector::WholeRunEstimate e = selector::EstimateWholeRun(in);
  projections_.clear();
  self_checks_.clear();
  // Deltas and gauges alike: a gauge's row holds its time-weighted mean (kind 1), never a sum.
  for (const selector::WholeRunProjection& p : e.projections)
    projections_.push_back(ToProjection(p));
  for (const selector::WholeRunSelfCheck& c : e.self_checks) self_checks_.push_back(ToSelfCheck(c));
  computed_at_ns_ = now_ns;
  dirty_ = false;
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
// observer effect), histogram and measurements, with the live check's arithmetic
// (selector::SettleSelfCheck) and scale (iterations that have the metric / observed).
std::vector<SelfCheck> StoredSelfChecks(const RunSnapshot& s,
                                        const std::vector<Measurement>& measurements,
                                        const ObserverEffect& oe) {
  std::vector<SelfCheck> out;
  std::map<uint64_t, MeasuredTiming> timings;
  for (MeasuredTiming& t : TimingsFrom(measurements)) timings[t.ordinal] = std::move(t);
  uint64_t all = 0, timed = 0, with_energy = 0;
  for (const HistogramBin& b : s.histogram) {
    all += b.count;
    timed += b.time_count > 0 || b.time_ns_sum <= 0 ? b.time_count : b.count;
    with_energy += b.energy_count;
  }
  for (const std::string metric : {"time_ns", "energy_uj"}) {
    for (const Projection& p : s.projections) {
      if (p.metric != metric || !std::isfinite(p.actual) || p.actual <= 0) continue;
      selector::WholeRunSelfCheck c;
      c.metric = p.metric;
      c.unit = p.unit;
      // Like the live check: the observed iterations only, without the unobserved gap. The
      // window-only check is not stored: a closed run's is the projection's own.
      c.projected = c.independent_projected = p.total - p.gap_total;
      c.low = c.independent_low = p.low - p.gap_low;
      c.high = c.independent_high = std::isfinite(p.gap_high) ? p.high - p.gap_high : p.high;
      c.actual = p.actual;
      for (const Measurement& m : measurements) {
        auto t = timings.find(m.ordinal);
        if (m.metric != metric || t == timings.end() || t->second.control) continue;
        const ObserverEstimate* slow = oe.SlowdownOf(t->second.groups);
        if (slow == nullptr || !(slow->ratio > 0)) continue;
        c.observer_excess += m.value * (1 - 1 / slow->ratio);
        c.observer_ratio = std::max(c.observer_ratio, slow->ratio);
      }
      const uint64_t count = metric == "energy_uj" ? with_energy : timed;
      selector::SettleSelfCheck(c, all ? static_cast<double>(count) / static_cast<double>(all) : 1);
      out.push_back(ToSelfCheck(c));
    }
  }
  return out;
}

}  // namespace seqpoint::daemon
