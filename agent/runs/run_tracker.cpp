#include "agent/runs/run_tracker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "common/clock.h"
#include "selector/estimate/projection.h"
#include "selector/estimate/whole_run_estimator.h"

namespace seqpoint::daemon {

bool IsBookkeepingMetric(const std::string& metric) {
  return metric.rfind("observer:", 0) == 0 || metric.rfind(kGroupPrefix, 0) == 0;
}

collectors::Sample EnergySample(double uj) {
  return collectors::DeviceSample("energy_uj", uj, "uJ", collectors::SampleKind::kDelta, "node");
}

Result<std::unique_ptr<RunTracker>> RunTracker::Create(RunRecord record,
                                                       const selector::OnlineOptions& options) {
  auto sel = selector::OnlineSelector::Create(options);
  if (!sel.ok()) return sel.status().WithContext("runs.budget");
  return std::unique_ptr<RunTracker>(new RunTracker(std::move(record), std::move(*sel), options));
}

Result<std::unique_ptr<RunTracker>> RunTracker::Restore(
    const RunSnapshot& snapshot, const std::vector<Measurement>& measurements,
    const std::vector<IterationLogEntry>& log, const selector::OnlineOptions& options,
    std::string_view checkpoint) {
  auto created = Create(snapshot.run, options);
  if (!created.ok()) return created.status();
  RunTracker& t = **created;
  if (!checkpoint.empty()) SEQPOINT_RETURN_IF_ERROR(t.LoadCheckpoint(checkpoint));
  for (const IterationLogEntry& e : log) {
    selector::Decision d;
    const uint32_t n = std::max<uint32_t>(1, e.repeat);
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t ordinal = t.Feed(e.pid, e.iter, e.seq_len, e.batch, e.tokens / n,
                                      (e.flags & kIterationLogUnmeasurable) == 0, &d, nullptr,
                                      (e.flags & kIterationLogOverBudget) != 0);
      // The time strata (warm-up, changes) come back with the times; an aggregated entry
      // gives each of its iterations the mean.
      if (e.time_ns > 0) t.selector_.OnTime(ordinal, e.seq_len, e.batch, e.time_ns / n);
    }
  }
  // A restored run with a history is past its first poll batch: from here an end-only iteration
  // is "cannot measure", as it is in an uninterrupted run once begins arrive. (A run that never
  // saw a begin before the restart takes no more time-only SeqPoints after it: both decisions
  // are logged, so the replay of what was decided is exact either way.)
  t.begins_seen_ = snapshot.run.iterations > 0 || !checkpoint.empty();
  t.new_log_.clear();
  t.tail_log_.clear();
  t.first_iter_.clear();     // the replayed first iterations were judged before the restart
  t.record_ = snapshot.run;  // counters as saved, not as re-counted by the replay
  t.histogram_.clear();
  for (const HistogramBin& b : snapshot.histogram) {
    t.histogram_[b.seq_len] = b;
    t.actual_time_ns_ += b.time_ns_sum;
    // Timed iterations only (untimed ones have no begin): a row of an older store that has a
    // time but no count of timed iterations falls back to every iteration of the bin.
    t.timed_iterations_ += b.time_count > 0 || b.time_ns_sum <= 0 ? b.time_count : b.count;
    t.actual_energy_uj_ += b.energy_uj_sum;
    t.energy_iterations_ += b.energy_count;
  }
  for (const Measurement& m : measurements) {
    auto& mi = t.measured_[m.ordinal];
    mi.pid = m.pid;
    mi.iter = m.iter;
    mi.seq_len = m.seq_len;
    mi.batch = m.batch;
    // The store's bookkeeping rows become the typed fields (the one place that parses them).
    if (m.metric == kControlMetric) mi.control = m.value != 0;
    if (m.metric.rfind(kGroupPrefix, 0) == 0) {
      mi.groups.push_back({m.metric.substr(kGroupPrefix.size()), static_cast<uint32_t>(m.value)});
    }
    if (IsBookkeepingMetric(m.metric)) continue;  // typed above, not a metric
    collectors::Sample v{m.metric, m.value, m.unit};
    collectors::InferScopeAndKind(v);  // the store keeps no scope or kind: as collected
    mi.values.push_back(std::move(v));
  }
  for (const auto& [ordinal, mi] : t.measured_) ++t.visits_[mi.pid];
  t.dirty_ = true;
  t.observer_dirty_ = true;
  return created;
}

uint64_t RunTracker::Feed(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch, double tokens,
                          bool can_measure, selector::Decision* decision, LogRef* log,
                          bool over_budget) {
  const uint64_t ordinal = next_ordinal_++;
  // Spent before this iteration: then it cannot be a sample, and its order no longer matters.
  const bool spent = options_.budget_count > 0 && options_.budget_fraction <= 0 &&
                     selector_.measured() >= options_.budget_count;
  *decision = selector_.OnIteration(ordinal, seq_len, batch, tokens, can_measure, over_budget);
  const uint32_t flags = (can_measure ? 0 : kIterationLogUnmeasurable) |
                         (decision->over_budget ? kIterationLogOverBudget : 0);
  if (decision->measure) sample_ids_[ordinal] = {pid, iter};
  LogRef ref;
  ref.generation = log_generation_;
  if (spent) {
    IterationLogEntry& e = tail_log_[{pid, seq_len, batch}];
    // Spent: nothing is chosen any more, so the flag no longer changes a decision.
    e = {pid, seq_len, iter, batch, e.repeat + 1, e.tokens + tokens, e.time_ns, flags};
    ref.tail = true;
    ref.key = {pid, seq_len, batch};
  } else {
    ref.index = new_log_.size();
    new_log_.push_back({pid, seq_len, iter, batch, 1, tokens, 0, flags});
  }
  if (log != nullptr) *log = ref;
  auto [it, first] = last_iter_.try_emplace(pid, iter);
  if (first && iter > 0) {
    // A first index above 0 is either iterations run before the probes attached or where the
    // process's numbering starts (a job resumed at its global step). With the process's start
    // known, Complete tells them apart; without it, they count as missed.
    if (process_start_ns_.count(pid)) {
      first_iter_[pid] = iter;
    } else {
      record_.unobserved += iter;
    }
  } else if (!first) {
    if (iter > it->second + 1) record_.unobserved += iter - it->second - 1;
    it->second = std::max(it->second, iter);
  }
  HistogramBin& bin = histogram_[seq_len];
  bin.seq_len = seq_len;
  ++bin.count;
  ++record_.iterations;
  record_.max_iter = std::max(record_.max_iter, iter);
  dirty_ = true;
  return ordinal;
}

selector::Decision RunTracker::Decide(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch,
                                      double tokens) {
  auto key = std::make_pair(pid, iter);
  if (auto it = pending_.find(key); it != pending_.end()) return it->second.decision;
  begins_seen_ = true;
  selector::Decision d;
  LogRef ref;
  uint64_t ordinal = Feed(pid, iter, seq_len, batch, tokens, /*can_measure=*/true, &d, &ref);
  const bool control =
      d.measure && IsControlVisit(visits_[pid]++, control_every_,
                                  static_cast<uint64_t>(pid) * 1000003u + record_.id);
  pending_[key] = {ordinal, d, control, ref};
  return d;
}

bool RunTracker::IsControl(pid_t pid, uint64_t iter) const {
  auto it = pending_.find({pid, iter});
  return it != pending_.end() && it->second.control;
}

void RunTracker::Complete(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch, double tokens,
                          uint64_t begin_ns, uint64_t end_ns,
                          const std::vector<collectors::Sample>& values,
                          std::optional<double> energy_uj, const std::vector<CounterGroup>& groups,
                          bool energy_later) {
  Pending p{};
  auto key = std::make_pair(pid, iter);
  if (auto it = pending_.find(key); it != pending_.end()) {
    p = it->second;
    pending_.erase(it);
  } else {
    // No begin was seen (the hooks were off when it began): no collector covered it, so once
    // begins reach this run the selector counts it as "cannot measure", never as a sample or a
    // decline. Before any begin has (begins_seen_), its time is the one measure there is: it may
    // be chosen for time alone, or a short run read after it ended would have no SeqPoint.
    const bool timed_only = !begins_seen_ && begin_ns > 0 && end_ns >= begin_ns;
    p.ordinal =
        Feed(pid, iter, seq_len, batch, tokens, /*can_measure=*/timed_only, &p.decision, &p.log);
  }
  const int64_t now = WallNs();
  const bool timed = begin_ns > 0 && end_ns >= begin_ns;
  const double time_ns = timed ? static_cast<double>(end_ns - begin_ns) : 0;
  const double energy = energy_uj.value_or(-1);
  const bool has_energy = std::isfinite(energy) && energy >= 0;
  HistogramBin& bin = histogram_[seq_len];
  if (timed) JudgeFirstIteration(pid, begin_ns, time_ns);
  if (timed) {
    bin.time_ns_sum += time_ns;
    ++bin.time_count;
    ++timed_iterations_;
    actual_time_ns_ += time_ns;
    ++spread_n_;
    spread_sum_ += time_ns;
    spread_sumsq_ += time_ns * time_ns;
    AddCost(seq_len, "time_ns", time_ns, now);
    // Every iteration's time: the warm-up, the windows and the changes of cost (time strata).
    selector_.OnTime(p.ordinal, seq_len, batch, time_ns);
    LogTime(p.log, time_ns);
  }
  if (has_energy) {
    bin.energy_uj_sum += energy;
    ++bin.energy_count;
    ++energy_iterations_;
    actual_energy_uj_ += energy;
    AddCost(seq_len, "energy_uj", energy, now);
  }
  if (p.decision.measure) {
    MeasuredIteration& mi = measured_[p.ordinal];
    mi = {pid, iter, seq_len, batch, {}, p.control, {}};
    for (const CounterGroup& g : groups) AddGroup(p.ordinal, g);
    for (const collectors::Sample& v : values) {
      if (v.name.rfind(kGroupPrefix, 0) == 0) {  // an older caller's group row
        AddGroup(p.ordinal, {v.name.substr(kGroupPrefix.size()), static_cast<uint32_t>(v.value)});
        continue;
      }
      // The sampler's energy wins: it is the one the actual total sums.
      if ((has_energy || energy_later) && v.name == "energy_uj") continue;
      AddValue(p.ordinal, mi, v);
      if (!IsBookkeepingMetric(v.name)) AddCost(seq_len, v.name, v.value, now);
    }
    if (timed) {
      AddValue(p.ordinal, mi, {"time_ns", time_ns, "ns"});
      // Against the SL's mean time so far (this one included): what measuring adds.
      if (!p.control && bin.time_count > 1) {
        const double ratio = time_ns / (bin.time_ns_sum / static_cast<double>(bin.time_count));
        measured_ratio_sum_ += ratio;
        measured_ratio_sumsq_ += ratio * ratio;
        ++measured_ratio_n_;
        UpdateMeasurementCost();
      }
    }
    if (has_energy) AddValue(p.ordinal, mi, EnergySample(energy));
    if (p.control) AddStoreRow(p.ordinal, mi, std::string(kControlMetric), 1, "flag");
    observer_dirty_ = true;
  }
  if (energy_later && !has_energy) {
    energy_waiting_[{pid, iter}] = {p.ordinal, seq_len, p.decision.measure};
  }
  last_timed_.reset();
  if (timed) last_timed_ = {{pid, iter}, {p.ordinal, seq_len, p.decision.measure}};
  record_.updated_unix_ns = now;
  dirty_ = true;
}

void RunTracker::SettleEnergy(pid_t pid, uint64_t iter, std::optional<double> energy_uj) {
  auto it = energy_waiting_.find({pid, iter});
  if (it == energy_waiting_.end()) return;
  const EnergyWait w = it->second;
  energy_waiting_.erase(it);
  if (!energy_uj || !std::isfinite(*energy_uj) || *energy_uj < 0) return;
  const double energy = *energy_uj;
  HistogramBin& bin = histogram_[w.seq_len];
  bin.energy_uj_sum += energy;
  ++bin.energy_count;
  ++energy_iterations_;
  actual_energy_uj_ += energy;
  const int64_t now = WallNs();
  AddCost(w.seq_len, "energy_uj", energy, now);
  if (w.measured) {
    if (auto m = measured_.find(w.ordinal); m != measured_.end()) {
      AddValue(w.ordinal, m->second, EnergySample(energy));
      observer_dirty_ = true;
    }
  }
  record_.updated_unix_ns = now;
  dirty_ = true;
}

bool RunTracker::AwaitCpu(pid_t pid, uint64_t iter) {
  if (!last_timed_ || last_timed_->first != std::make_pair(pid, iter)) return false;
  // Bounded: an iteration never settled (its process's clock stopped) makes room.
  if (cpu_waiting_.size() >= kMaxCpuWaiting) {
    cpu_waiting_.erase(cpu_waiting_.begin());
    ++cpu_uncovered_;
  }
  cpu_waiting_.insert(*last_timed_);
  last_timed_.reset();
  return true;
}

void RunTracker::SettleCpu(pid_t pid, uint64_t iter, std::optional<double> cpu_ns) {
  auto it = cpu_waiting_.find({pid, iter});
  if (it == cpu_waiting_.end()) return;
  const EnergyWait w = it->second;
  cpu_waiting_.erase(it);
  if (!cpu_ns || !std::isfinite(*cpu_ns) || *cpu_ns < 0 ||
      !selector_.OnCpu(w.ordinal, w.seq_len, *cpu_ns)) {
    ++cpu_uncovered_;
    return;
  }
  ++cpu_iterations_;
  actual_cpu_ns_ += *cpu_ns;
  if (w.measured) {
    if (auto m = measured_.find(w.ordinal); m != measured_.end()) {
      AddValue(w.ordinal, m->second, {selector::kProcessCpuMetric, *cpu_ns, "ns"});
    }
  }
  record_.updated_unix_ns = WallNs();
  dirty_ = true;
}

bool RunTracker::AddLateValues(pid_t pid, uint64_t iter,
                               const std::vector<collectors::Sample>& values) {
  // The latest measured iterations are the ones late values belong to: searched from the end.
  for (auto it = measured_.rbegin(); it != measured_.rend(); ++it) {
    if (it->second.pid != pid || it->second.iter != iter) continue;
    const uint64_t ordinal = it->first;
    const uint32_t seq_len = it->second.seq_len;
    const int64_t now = WallNs();
    for (const collectors::Sample& v : values) {
      // A device is counted once per iteration (a data-parallel step's ranks on one GPU).
      const auto& had = it->second.values;
      if (v.scope == collectors::SampleScope::kDevice &&
          std::any_of(had.begin(), had.end(), [&](const collectors::Sample& h) {
            return h.name == v.name && h.device == v.device;
          })) {
        continue;
      }
      AddValue(ordinal, measured_[ordinal], v);
      if (!IsBookkeepingMetric(v.name)) AddCost(seq_len, v.name, v.value, now);
    }
    observer_dirty_ = true;
    record_.updated_unix_ns = now;
    dirty_ = true;
    return true;
  }
  return false;
}

void RunTracker::AddValue(uint64_t ordinal, const MeasuredIteration& mi, collectors::Sample v) {
  new_measurements_.push_back(
      {ordinal, mi.pid, mi.iter, mi.seq_len, mi.batch, v.name, v.unit, v.value, v.device});
  measured_[ordinal].values.push_back(std::move(v));
}

void RunTracker::AddGroup(uint64_t ordinal, const CounterGroup& g) {
  MeasuredIteration& mi = measured_[ordinal];
  for (const CounterGroup& had : mi.groups) {
    if (had.collector == g.collector) return;  // one per collector (the step join's ranks)
  }
  mi.groups.push_back(g);
  AddStoreRow(ordinal, mi, std::string(kGroupPrefix) + g.collector, static_cast<double>(g.group),
              "group");
}

void RunTracker::AddStoreRow(uint64_t ordinal, const MeasuredIteration& mi, std::string metric,
                             double value, std::string unit) {
  // The store's row only: in memory the typed field says it (MeasuredIteration).
  new_measurements_.push_back(
      {ordinal, mi.pid, mi.iter, mi.seq_len, mi.batch, std::move(metric), std::move(unit), value});
}

void RunTracker::SetProcessStart(pid_t pid, uint64_t start_ns) {
  if (start_ns > 0) process_start_ns_[pid] = start_ns;
}

void RunTracker::JudgeFirstIteration(pid_t pid, uint64_t begin_ns, double time_ns) {
  auto f = first_iter_.find(pid);
  if (f == first_iter_.end()) return;
  const uint64_t first = f->second;
  first_iter_.erase(f);
  auto start = process_start_ns_.find(pid);
  if (start == process_start_ns_.end() || begin_ns <= start->second) return;
  // Could `first` iterations, each at least as long as this one (the first iterations of a
  // process are its slowest: warm-up), have run between the process's start and this
  // iteration's begin? Only then were they run and missed before the probes attached; else the
  // index is where the process's numbering starts, and nothing was missed.
  const double since_start = static_cast<double>(begin_ns - start->second);
  if (static_cast<double>(first) * time_ns > since_start) return;
  record_.unobserved += first;
  record_.unobserved_before_attach += first;
}

void RunTracker::DropPending(pid_t pid) {
  std::erase_if(pending_, [pid](const auto& kv) { return kv.first.first == pid; });
}

MeasurementCost RunTracker::measurement_cost() const {
  MeasurementCost c;
  c.max_overhead = options_.max_overhead;
  c.target_error = options_.target_rel_error;
  c.measured = measured_.size();
  c.end_only = selector_.unmeasurable();
  c.missed = selector_.missed();
  c.over_budget = selector_.over_budget();
  c.hooks_wanted = WantsBegins();
  double hw = 0;
  (void)selector_.StratumPreciseEnough(&hw);
  c.stratum_half_width = std::isfinite(hw) ? hw : -1;
  const double mean = timed_iterations_ > 0 ? actual_time_ns_ / timed_iterations_ : 0;
  // The low end of a 95% interval of the slowdown, never its point: on a busy machine the noise
  // between iterations is far above a collector's cost, and a point estimate clamped at 0 could
  // only err high (a live 2-core run read 4.26 ms where measuring cost ~0). A cost the
  // interval cannot tell from 0 is 0: the overhead budget thins nothing for noise.
  if (observer_.all.valid) {
    c.source = "observer";  // the distribution-free interval of the controls' median ratio
    c.per_measured_ns = std::max(0.0, observer_.all.low - 1) * mean;
  } else if (measured_ratio_n_ > 0) {
    c.source = "measured";  // mean ratio less 1.96 standard errors (none below 2 ratios)
    const double n = static_cast<double>(measured_ratio_n_);
    const double m = measured_ratio_sum_ / n;
    const double var = n >= 2 ? std::max(0.0, (measured_ratio_sumsq_ - n * m * m) / (n - 1)) : 0;
    const double low = n >= 2 ? m - 1.96 * std::sqrt(var / n) : 1;
    c.per_measured_ns = std::max(0.0, low - 1) * mean;
  }
  c.total_ns = c.per_measured_ns * static_cast<double>(c.measured);
  c.share = actual_time_ns_ > 0 ? c.total_ns / actual_time_ns_ : 0;
  return c;
}

void RunTracker::UpdateMeasurementCost() {
  // The selector's overhead cap uses it; 0 (unknown) leaves the cap off.
  if (options_.max_overhead > 0) selector_.set_measurement_cost(measurement_cost().per_measured_ns);
}

bool RunTracker::WantsBegins() const { return !BudgetSpent() && selector_.WantsNext(); }

void RunTracker::AddCost(uint32_t seq_len, const std::string& metric, double value,
                         int64_t now_ns) {
  auto [lo, hi] = HistoryBin(seq_len);
  const int64_t day = UnixDay(now_ns);
  BinCostRow& row = cost_deltas_[{day, lo, metric}];
  row.day = day;
  row.bin_lo = lo;
  row.bin_hi = hi;
  row.metric = metric;
  row.n += 1;
  row.sum += value;
  row.sumsq += value * value;
}

RunSnapshot RunTracker::Snapshot(int64_t max_age_ns) {
  const int64_t now = MonotonicNs();
  if (dirty_ && (computed_at_ns_ < 0 || now - computed_at_ns_ >= max_age_ns)) Recompute(now);
  RunSnapshot s;
  s.run = record_;
  s.histogram.reserve(histogram_.size());
  for (const auto& [sl, bin] : histogram_) s.histogram.push_back(bin);
  s.seqpoints = seqpoints_;
  s.projections = projections_;
  return s;
}

SelfCheck RunTracker::self_check(int64_t max_age_ns) {
  (void)Snapshot(max_age_ns);
  for (const SelfCheck& c : self_checks_) {
    if (c.metric == "time_ns") return c;
  }
  return SelfCheck{};
}

std::vector<SelfCheck> RunTracker::self_checks(int64_t max_age_ns) {
  (void)Snapshot(max_age_ns);
  return self_checks_;
}

size_t RunTracker::MemoryBytes() const {
  return sizeof(*this) + selector_.MemoryBytes() + histogram_.size() * 64 + measured_.size() * 160 +
         pending_.size() * 64 + sample_ids_.size() * 64 + visits_.size() * 48 +
         new_log_.capacity() * sizeof(IterationLogEntry) + tail_log_.size() * 96;
}

std::vector<Measurement> RunTracker::TakeNewMeasurements() {
  return std::exchange(new_measurements_, {});
}
void RunTracker::LogTime(const LogRef& log, double time_ns) {
  if (log.tail) {
    // The aggregated entry is the same key until taken; a lost time only thins the replay.
    if (auto it = tail_log_.find(log.key); it != tail_log_.end()) it->second.time_ns += time_ns;
    return;
  }
  // An entry taken by a flush since (the iteration was in flight) keeps no time.
  if (log.generation == log_generation_ && log.index < new_log_.size()) {
    new_log_[log.index].time_ns = time_ns;
  }
}

std::vector<IterationLogEntry> RunTracker::TakeNewLog() {
  ++log_generation_;
  std::vector<IterationLogEntry> out = std::exchange(new_log_, {});
  for (auto& [key, e] : tail_log_) out.push_back(e);  // after every ordered entry
  tail_log_.clear();
  return out;
}
std::vector<BinCostRow> RunTracker::TakeCostDeltas() {
  std::vector<BinCostRow> out;
  for (auto& [k, v] : cost_deltas_) out.push_back(std::move(v));
  cost_deltas_.clear();
  return out;
}

void RunTracker::ReturnUnsaved(std::vector<Measurement> measurements,
                               std::vector<IterationLogEntry> log, std::vector<BinCostRow> costs) {
  measurements.insert(measurements.end(), new_measurements_.begin(), new_measurements_.end());
  new_measurements_ = std::move(measurements);
  log.insert(log.end(), new_log_.begin(), new_log_.end());
  new_log_ = std::move(log);
  ++log_generation_;
  for (BinCostRow& c : costs) {
    BinCostRow& row = cost_deltas_[{c.day, c.bin_lo, c.metric}];
    if (row.n == 0) {
      row = c;
    } else {
      row.n += c.n;
      row.sum += c.sum;
      row.sumsq += c.sumsq;
    }
  }
}

}  // namespace seqpoint::daemon
