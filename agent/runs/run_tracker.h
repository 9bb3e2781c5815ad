// One run's live state: the online selector fed with every iteration of the run's processes,
// the exact-SL histogram, the cheap metrics of every iteration (iteration time from the probes'
// timestamps; energy where a source is present, energy_sampler.h), the collectors'
// measurements of the chosen ones, and the projections with their 95% intervals. The cheap
// metrics are known for every iteration, so the tracker also projects them from the SeqPoints
// alone and compares with the actual totals: the self-checks, exported as live confidence
// figures.
//
// Observer effect (observer_effect.h): one in runs.observer_effect_control_every of the
// iterations chosen in a process is a control, timed but measured by no collector (Decide
// says so through IsControl). Controls are marked by MeasuredIteration::control, the counter
// groups a treated iteration held by MeasuredIteration::groups (stored as "observer:control"
// and "group:<collector>" measurement rows, read back by Restore only). A flag, once raised,
// stays for the run (the estimate is remade as pairs arrive). Once the effect is flagged, the
// time and energy projections divide each perturbed iteration's value by its
// estimated slowdown (their intervals by the slowdown's interval ends), their self-checks
// compare with the actual total less the estimated excess (observer_excess), and the
// projections of collector metrics fed by perturbed iterations are marked perturbed: their
// values cannot be corrected.
//
// Iterations are numbered in arrival order across the run's processes (the ordinal). The
// selector sees ordinals; SeqPoints are reported with each process's own iteration index.
//
// Restart: every iteration fed to the selector is logged (IterationLogEntry); Restore() replays
// the log into a fresh selector (it is deterministic), so its state is exactly as before. Now
// and then RunManager stores a Checkpoint() instead (run_checkpoint.cpp): Restore() loads it and
// replays only the log entries saved after it, so the log stays bounded (docs/bounds.md).
//
// Threads: not thread-safe; owned and driven by RunManager on the io_context thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "agent/measure/observer_effect.h"
#include "agent/runs/counter_group.h"
#include "agent/store/run_model.h"
#include "agent/store/store.h"
#include "collectors/collector.h"
#include "common/status.h"
#include "selector/online_selector.h"

namespace seqpoint::daemon {

// The self-check: projected vs actual total of a metric measured on every iteration.
struct SelfCheck {
  std::string metric = "time_ns";  // or "energy_uj"
  std::string unit = "ns";
  double projected = 0, low = 0, high = 0, actual = 0;
  // What measuring added to the actual total, as estimated from the observer effect: the sum
  // over perturbed iterations of value * (1 - 1 / slowdown); 0 while nothing is flagged.
  double observer_excess = 0;
  double observer_ratio = 1;  // the largest slowdown the projection was corrected by (1: none)
  // (projected - (actual - observer_excess)) / (actual - observer_excess), per iteration that
  // has the metric (iterations in flight, without a begin, or without energy do not count).
  double error = 0;
  bool within_interval = false;
  bool valid = false;  // enough data for a figure
};

// What measuring costs a run (runs.max_overhead, runs.target_error): show and /metrics.
struct MeasurementCost {
  // The trainer's added time per measured iteration, ns, at least (the low end of a 95%
  // interval, 0 where it covers no slowdown): from the observer-effect check's controls
  // ("observer") once it has pairs, else from the measured iterations' times against their
  // SL's mean ("measured"); 0 with source "none" while neither is known.
  double per_measured_ns = 0;
  std::string source = "none";
  double total_ns = 0;            // per_measured_ns x measured iterations
  double share = 0;               // of the run's timed time (total_ns / the iterations' time)
  double max_overhead = 0;        // runs.max_overhead (0: no cap)
  double target_error = 0;        // runs.target_error (0: off)
  double stratum_half_width = 0;  // the current stratum's relative 95% half-width (<0: unknown)
  uint64_t measured = 0;
  uint64_t end_only = 0;      // since start: iterations fed without a begin (hooks off)
  uint64_t missed = 0;        // of those, candidates lost ("cannot measure")
  uint64_t over_budget = 0;   // since start: candidates declined by runs.max_overhead
  bool hooks_wanted = false;  // whether the next iteration gets begin hooks
};

// A closed run's observer effect and self-checks, rebuilt from what the store holds (its
// projections are stored already corrected).
ObserverEffect StoredObserverEffect(const RunSnapshot& snapshot,
                                    const std::vector<Measurement>& measurements, double threshold);
std::vector<SelfCheck> StoredSelfChecks(const RunSnapshot& snapshot,
                                        const std::vector<Measurement>& measurements,
                                        const ObserverEffect& observer);

// Measurement rows that record how an iteration was measured ("observer:control",
// "group:<collector>"), not metrics of their own: never projected.
bool IsBookkeepingMetric(const std::string& metric);
inline constexpr std::string_view kControlMetric = "observer:control";
inline constexpr std::string_view kGroupPrefix = "group:";
// The node's energy over an iteration, as the tracker records it (a device delta, "node").
collectors::Sample EnergySample(double uj);

class RunTracker {
 public:
  static Result<std::unique_ptr<RunTracker>> Create(RunRecord record,
                                                    const selector::OnlineOptions& options);
  // Rebuilds a tracker from the store: record, histogram, measurements, the checkpoint (may be
  // empty) and the iteration log saved after it.
  static Result<std::unique_ptr<RunTracker>> Restore(const RunSnapshot& snapshot,
                                                     const std::vector<Measurement>& measurements,
                                                     const std::vector<IterationLogEntry>& log,
                                                     const selector::OnlineOptions& options,
                                                     std::string_view checkpoint = {});
  // The state the log would rebuild (the selector, the ordinals and last iteration of each
  // process), as bytes: it stands for every log entry taken so far.
  std::string Checkpoint() const;

  // At an iteration's start: feeds the selector once; measure=true when it should be measured
  // (group: the counter group to collect). Again for the same (pid, iter): the first decision.
  selector::Decision Decide(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch,
                            double tokens);
  // At its end: time_ns = end - begin (when begin_ns > 0); energy_uj: the iteration's share of
  // the node's energy (energy_sampler.h), when known; `values` are the collectors'
  // measurements (empty unless Decide said so).
  // Decides first when no begin was seen.
  // `groups`: the counter group each collector held (a "group:<collector>" value in `values`,
  // as older callers pass it, is taken as one too).
  // energy_later: the iteration's energy comes later, from SettleEnergy (the sampler had no
  // sample past its end yet: energy is never read on the iteration path).
  void Complete(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch, double tokens,
                uint64_t begin_ns, uint64_t end_ns, const std::vector<collectors::Sample>& values,
                std::optional<double> energy_uj = std::nullopt,
                const std::vector<CounterGroup>& groups = {}, bool energy_later = false);
  // The energy of an iteration completed with energy_later (nullopt: it has none, the caller
  // counted why). Iterations are settled in any order; one not waiting is ignored.
  void SettleEnergy(pid_t pid, uint64_t iter, std::optional<double> energy_uj);
  size_t energy_waiting() const { return energy_waiting_.size(); }
  // The process's CPU time over an iteration (process_cpu_sampler.h), the auxiliary of the CPU
  // counters' projections (docs/estimators.md). AwaitCpu, right after the iteration's
  // Complete, marks it as waiting for one (false: it was not the last one completed, or not
  // timed); SettleCpu gives it (nullopt: none, counted). Settled in any order.
  bool AwaitCpu(pid_t pid, uint64_t iter);
  void SettleCpu(pid_t pid, uint64_t iter, std::optional<double> cpu_ns);
  size_t cpu_waiting() const { return cpu_waiting_.size(); }
  static constexpr size_t kMaxCpuWaiting = 65536;
  uint64_t cpu_iterations() const { return cpu_iterations_; }
  uint64_t cpu_uncovered() const { return cpu_uncovered_; }
  double actual_cpu_ns() const { return actual_cpu_ns_; }
  // Values of a measured iteration that come after its Complete: the GPU values of a window a
  // later CUDA/HIP sync closed (agent/measure/measurement_gpu_sync.cpp). False when (pid, iter)
  // is no measured iteration of this run (nothing added).
  bool AddLateValues(pid_t pid, uint64_t iter, const std::vector<collectors::Sample>& values);
  // An iteration that has a time but no energy: another run shared the node (shared) or the
  // energy counter did not cover it (read failure, too old).
  void CountEnergyUnattributed(bool shared) { ++(shared ? energy_shared_ : energy_uncovered_); }
  // Whether the iteration Decide chose is a control: timed, but no collector may run on it.
  bool IsControl(pid_t pid, uint64_t iter) const;
  // One in `every` chosen iterations per process is a control (< 2: none; applies from now).
  void set_control_every(uint32_t every) { control_every_ = every; }
  // Forgets decisions of iterations that will never complete (process gone).
  void DropPending(pid_t pid);
  // When the process started (CLOCK_MONOTONIC ns, the probes' clock). With it, a process whose
  // first observed index is i > 0 is charged i unobserved iterations (before the probes
  // attached) only if i iterations fit between its start and that iteration; a process resumed
  // at its global step is charged none. Unknown (never called, a replayed trace): charged i.
  void SetProcessStart(pid_t pid, uint64_t start_ns);

  // True while the selector could choose the next iteration (a free slot of its budget, past
  // the warm-up): only then are begin hooks (and their counters) worth having. With a paced
  // budget it turns on at each step of the pace and off once the slot is used. An iteration
  // that arrives end-only (its begin came before the hooks were armed) is fed as "cannot
  // measure" (online_selector.h), and its log entry says so, for the replay.
  bool WantsBegins() const;
  // A count budget measured whole: it will never choose again (collectors can be released).
  bool BudgetSpent() const {
    return options_.budget_count > 0 && selector_.measured() >= options_.budget_count;
  }
  // Since this tracker started: iterations fed without a begin, and chosen ones lost that way.
  uint64_t unmeasurable_iterations() const { return selector_.unmeasurable(); }
  uint64_t missed_candidates() const { return selector_.missed(); }
  MeasurementCost measurement_cost() const;

  RunRecord& record() { return record_; }
  const RunRecord& record() const { return record_; }
  // Histogram, SeqPoints and projections as of now (projections cached for max_age_ns).
  RunSnapshot Snapshot(int64_t max_age_ns = 0);
  // The self-checks as of the projections (recomputed when older than max_age_ns, as Snapshot).
  SelfCheck self_check(int64_t max_age_ns = 0);  // iteration time
  // Time, then energy when the run has any.
  std::vector<SelfCheck> self_checks(int64_t max_age_ns = 0);
  // The observer effect as of now; `threshold` as a fraction (0.05: flag above +5%).
  const ObserverEffect& observer_effect(double threshold);
  // Collectors this run no longer uses (runs.observer_effect_action = "drop").
  std::set<std::string>& dropped_collectors() { return dropped_collectors_; }
  // True when the estimate was recomputed since the last call (after a measured iteration,
  // or with the projections).
  bool TakeObserverUpdate() {
    return std::exchange(observer_handled_, observer_generation_) != observer_generation_;
  }
  // True the first time it is called after the observer effect is flagged (log once).
  bool FirstObserverWarning() { return !std::exchange(observer_warned_, true); }
  uint64_t timed_iterations() const { return timed_iterations_; }  // with a begin and an end
  uint64_t energy_iterations() const { return energy_iterations_; }
  uint64_t energy_shared() const { return energy_shared_; }
  uint64_t energy_uncovered() const { return energy_uncovered_; }
  uint64_t measured_iterations() const { return measured_.size(); }
  uint64_t selector_allowed() const { return selector_.allowed(); }
  uint32_t selector_bins() const { return selector_.bins(); }
  const selector::TimeStrata& strata() const { return selector_.strata(); }
  size_t MemoryBytes() const;

  // Whether anything waits to be written (else a flush skips the run).
  bool HasUnsaved() const {
    return !new_log_.empty() || !tail_log_.empty() || !new_measurements_.empty() ||
           !cost_deltas_.empty() || record_.updated_unix_ns != saved_at_ns_;
  }
  void MarkSaved() { saved_at_ns_ = record_.updated_unix_ns; }
  // What changed since the last call, for the store (cleared by the call).
  std::vector<Measurement> TakeNewMeasurements();
  std::vector<IterationLogEntry> TakeNewLog();
  std::vector<BinCostRow> TakeCostDeltas();
  // Puts back what a failed store write took, ahead of anything newer.
  void ReturnUnsaved(std::vector<Measurement> measurements, std::vector<IterationLogEntry> log,
                     std::vector<BinCostRow> costs);

 private:
  RunTracker(RunRecord record, selector::OnlineSelector selector,
             const selector::OnlineOptions& options)
      : record_(std::move(record)), selector_(std::move(selector)), options_(options) {}
  // Where Feed logged an iteration, so that Complete can add its time (time strata replay).
  struct LogRef {
    bool tail = false;
    size_t index = 0;                             // into new_log_ (when !tail)
    std::tuple<pid_t, uint32_t, uint32_t> key{};  // into tail_log_ (when tail)
    uint64_t generation = 0;
  };
  struct Pending {
    uint64_t ordinal;
    selector::Decision decision;
    bool control = false;
    LogRef log{};
  };
  struct MeasuredIteration {
    int32_t pid;
    uint64_t iter;
    uint32_t seq_len, batch;
    // The metrics, each with its scope and kind (collectors::Sample); the bookkeeping is in
    // `control` and `groups` (stored as "observer:control" / "group:<collector>" rows).
    std::vector<collectors::Sample> values;
    bool control = false;              // timed, no collector ran (observer_effect.h)
    std::vector<CounterGroup> groups;  // the counter group each collector held
  };
  Status LoadCheckpoint(std::string_view image);
  uint64_t Feed(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch, double tokens,
                bool can_measure, selector::Decision* decision, LogRef* log = nullptr,
                bool over_budget = false);
  void LogTime(const LogRef& log, double time_ns);
  void AddCost(uint32_t seq_len, const std::string& metric, double value, int64_t now_ns);
  void AddValue(uint64_t ordinal, const MeasuredIteration& mi, collectors::Sample v);
  void AddGroup(uint64_t ordinal, const CounterGroup& group);
  void AddStoreRow(uint64_t ordinal, const MeasuredIteration& mi, std::string metric, double value,
                   std::string unit);
  void JudgeFirstIteration(pid_t pid, uint64_t begin_ns, double time_ns);
  void Recompute(int64_t now_ns);

  RunRecord record_;
  selector::OnlineSelector selector_;
  selector::OnlineOptions options_;
  uint64_t next_ordinal_ = 0;
  std::map<uint64_t, std::pair<pid_t, uint64_t>> sample_ids_;  // chosen ordinal -> (pid, iter)
  std::map<std::pair<pid_t, uint64_t>, Pending> pending_;
  // A begin has reached Decide() since this tracker was created (a restored run with a history
  // counts as having seen one: Restore). Until one
  // has, the hooks never reached the run in time (a short run read after it ended, or the first
  // poll batch): a timed iteration fed end-only may still be chosen, for its time alone. After
  // one has, an end-only iteration is a lost candidate ("cannot measure") and its bin's want
  // stays open for an iteration the collectors can cover.
  bool begins_seen_ = false;
  std::map<pid_t, uint64_t> last_iter_;         // per process, to count unobserved indices
  std::map<pid_t, uint64_t> process_start_ns_;  // SetProcessStart
  std::map<pid_t, uint64_t> first_iter_;        // first index > 0, until a timed iteration
  // Iterations waiting for their energy (Complete with energy_later): ordinal and SL.
  struct EnergyWait {
    uint64_t ordinal;
    uint32_t seq_len;
    bool measured;
  };
  std::map<std::pair<pid_t, uint64_t>, EnergyWait> energy_waiting_;
  // The last iteration Complete timed (AwaitCpu), and those waiting for their CPU time.
  std::optional<std::pair<std::pair<pid_t, uint64_t>, EnergyWait>> last_timed_;
  std::map<std::pair<pid_t, uint64_t>, EnergyWait> cpu_waiting_;
  uint64_t cpu_iterations_ = 0, cpu_uncovered_ = 0;
  double actual_cpu_ns_ = 0;
  std::map<uint64_t, MeasuredIteration> measured_;  // by ordinal
  std::map<uint32_t, HistogramBin> histogram_;
  int64_t saved_at_ns_ = -1;
  uint64_t timed_iterations_ = 0;
  // Measured iterations' time over their SL's mean time so far (for MeasurementCost).
  double measured_ratio_sum_ = 0, measured_ratio_sumsq_ = 0;
  uint64_t measured_ratio_n_ = 0;
  void UpdateMeasurementCost();
  double actual_time_ns_ = 0;
  // Sums over the iterations timed since this tracker started (not restored): the spread of
  // one iteration's time, for the interval of the unobserved gap.
  uint64_t spread_n_ = 0;
  double spread_sum_ = 0, spread_sumsq_ = 0;
  uint64_t energy_iterations_ = 0;
  double actual_energy_uj_ = 0;
  uint64_t energy_shared_ = 0, energy_uncovered_ = 0;
  uint32_t control_every_ = 4;        // runs.observer_effect_control_every
  std::map<pid_t, uint64_t> visits_;  // chosen iterations per process, for the controls
  ObserverEffect observer_;
  double observer_threshold_ = 0.05;  // as last asked for (runs.observer_effect_threshold_pct)
  bool observer_dirty_ = true;
  uint64_t observer_generation_ = 0, observer_handled_ = 0;
  std::set<std::string> dropped_collectors_;
  std::set<std::string> observer_latched_;  // estimates once flagged ("" = all), see .cpp
  bool observer_warned_ = false;
  std::vector<Measurement> new_measurements_;
  std::vector<IterationLogEntry> new_log_;
  uint64_t log_generation_ = 0;  // bumped when new_log_ is taken or reordered
  std::map<std::tuple<pid_t, uint32_t, uint32_t>, IterationLogEntry> tail_log_;  // aggregated
  std::map<std::tuple<int64_t, uint32_t, std::string>, BinCostRow> cost_deltas_;
  // Cached projection.
  int64_t computed_at_ns_ = -1;
  bool dirty_ = true;
  std::vector<SeqPointRecord> seqpoints_;
  std::vector<Projection> projections_;
  std::vector<SelfCheck> self_checks_;
};

}  // namespace seqpoint::daemon
