// RunManager: the daemon's IterationSink. Groups the announced processes (process_registry.h:
// by pid and start time; events of pids never announced are counted and dropped) into runs
// (runs.group_by), feeds each run's RunTracker, runs the collectors around the iterations the
// selector chose, closes runs when their processes exit (marking crashes), and persists and
// resumes them through RunPersistence (run_persistence.h: one transaction per flush; a run that
// cannot be restored is set aside, the daemon starts).
//
// RunManager delegates, one owner per concern:
//  - MeasurementController (measure/measurement_controller.h): the collectors around the chosen
//    iterations, the profiler back-off and pause, the observer-effect checks and drops, the
//    counter windows and the collectors' totals;
//  - StepFeeder (steps/step_feeder.h): data-parallel runs, their step joins and the step's
//    device and energy policy (each device once per step; the node's energy over the step);
//  - RunPersistence (run_persistence.h): what is written when; ProcessRegistry: the processes.
// It keeps the IterationSink entry points, the runs' lifecycle (created from announced
// processes, closed when their processes exit or go idle) and the node's energy per iteration
// (run_manager_energy.cpp): with an EnergySampler, every timed iteration gets its share of the
// node's energy over its probe timestamps (energy_attribution.h says whose it is: shared only
// with the runs whose iterations overlap it in time), never read on the iteration path: an
// iteration that ended after the last sample, or overlaps another run's iteration not reported
// yet, waits. The sampler replaces the energy collector on SeqPoints.
//
// Threads: everything runs on the daemon's io_context thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/config/config_validate.h"
#include "agent/energy/energy_attribution.h"
#include "agent/energy/energy_sampler.h"
#include "agent/measure/collector_backoff.h"
#include "agent/measure/counter_windows.h"
#include "agent/measure/measurement_controller.h"
#include "agent/measure/profiler_watch.h"
#include "agent/runs/process_cpu_sampler.h"
#include "agent/runs/process_registry.h"
#include "agent/runs/run_persistence.h"
#include "agent/runs/run_tracker.h"
#include "agent/steps/step_feeder.h"
#include "agent/steps/step_join.h"
#include "agent/source/iteration_source.h"
#include "agent/source/run_key.h"
#include "agent/store/store.h"
#include "collectors/collector_set.h"
#include "selector/online_selector.h"

namespace seqpoint::daemon {

struct RunManagerOptions {
  RunGroupBy group_by;
  std::string proc_root = "/proc";
  selector::OnlineOptions selector;
  int64_t idle_timeout_s = 600;
  double observer_threshold = 0.05;  // runs.observer_effect_threshold_pct / 100
  bool observer_drop = false;        // runs.observer_effect_action == "drop"
  // runs.observer_effect_node_drop_s: > 0, a drop also applies to the node's later runs for
  // this long; 0, only to the run where the slowdown was found.
  int64_t observer_node_drop_s = 0;
  uint32_t observer_control_every = 4;  // runs.observer_effect_control_every
  ProfilerPatterns profilers;           // runs.profiler_libraries, runs.profiler_commands
  int64_t profiler_hold_down_s = 10;    // runs.profiler_hold_down_s
  // runs.gpu_sync_tail_ms, runs.gpu_sync_bound_ms: the GPU window rule (sync_window.h).
  collectors::SyncWindow::Options gpu_sync;
  // An active run's stored iteration log is replaced by a checkpoint once it holds this many
  // entries (40 bytes each: 2.5 MiB by default; docs/bounds.md).
  uint64_t checkpoint_every = 65536;
  // Closed runs kept in memory while the store cannot write them; past it the oldest is lost
  // (counted in runs_lost()).
  size_t max_unsaved_closed = 64;
};

class RunManager : public IterationSink {
 public:
  RunManager(Store* store, CollectorSetFactory collectors, RunManagerOptions options);
  // The source is told when a process's begin hooks are worth having.
  void set_source(IterationSource* source) {
    source_ = source;
    measure_.set_source(source);
  }
  // Called with the final snapshot of every run that closes (the uploader spools it).
  void set_on_run_closed(std::function<void(RunSnapshot)> fn) { on_closed_ = std::move(fn); }
  // Per-iteration energy from this sampler (null: none). Not owned; outlives the manager.
  // The manager settles parked iterations after each of the sampler's samples (its on_sample
  // callback): the sampler must not sample once the manager is gone.
  void set_energy_sampler(EnergySampler* sampler);
  // Iterations whose energy waits for the sampler's next sample (never read on the iteration
  // path: an iteration that ended after the last sample is parked, then settled), or for the
  // overlapping iterations of another run (energy_attribution.h).
  size_t energy_parked() const { return parked_.size(); }
  EnergySampler* energy_sampler() const { return energy_; }
  // The process CPU time of every timed iteration (process_cpu_sampler.h), the auxiliary of the
  // CPU counters' projections: the daemon calls this every ProcessCpuSampler::kIntervalMs
  // while processes are watched; it reads each live process's CPU clock and gives the parked
  // iterations their CPU time (run_manager_cpu.cpp).
  void SampleProcessCpu();
  size_t cpu_parked() const { return cpu_parked_.size(); }
  const ProcessCpuSampler& process_cpu() const { return cpu_; }
  const RunManagerOptions& options() const { return options_; }

  // Restores the active runs of the store; closes those whose processes are all gone.
  Status Resume();
  // Writes every run's changes, all runs in one transaction (run_persistence.h).
  Status Flush();
  // Ends the processes found gone from /proc whose exit the source has not reported (through
  // the source's exit path, IterationSource::ProcessesGone: their queued records first, in the
  // order they ended), and
  // closes runs that have had no live process for idle_timeout_s.
  void CloseIdleRuns();
  // New options apply to runs created from now on (a reload).
  void Reconfigure(const RunManagerOptions& options);

  void OnProcessFound(const ProcessInfo& process) override;
  void OnIterationBegin(const IterationBegin& begin) override;
  void OnIterationEnd(const IterationEnd& end) override;
  void OnProcessExit(const ProcessExit& exit) override;
  void OnIterationCounters(const IterationCounters& counters) override;
  // A collective's arrival (the collective probes): for the ranks' observer (StepFeeder's
  // RankObserver: the straggler book), if any.
  void OnCollectiveArrival(uint32_t pid, uint64_t ts_ns) {
    if (RankObserver* o = steps_.rank_observer()) o->OnCollectiveArrival(pid, ts_ns);
  }
  // Where measured iterations' counter windows started (counter_windows.h).
  const CounterWindows& counter_windows() const { return measure_.windows(); }

  // Looks for profilers on every watched process (live pids only), starts and ends back-offs,
  // and lifts a pause whose duration has passed (measure/measurement_backoff.cpp).
  void ScanProfilers() { measure_.ScanProfilers(); }
  // all = false: only processes backed off; the others are scanned when their libraries change
  // (OnLibrariesChanged) and when found (the daemon's tick still scans all now and then).
  void ScanProfilers(bool all) { measure_.ScanProfilers(all); }
  void OnLibrariesChanged(pid_t pid) override { measure_.ScanPid(pid); }
  // Closes every process's collectors until ResumeCollectors() or `duration_ns` from now.
  const PauseState& PauseCollectors(std::optional<int64_t> duration_ns) {
    return measure_.Pause(duration_ns);
  }
  // True when a pause was lifted.
  bool ResumeCollectors() { return measure_.Resume(); }
  const CollectorBackoff& backoff() const { return measure_.backoff(); }
  // The node-wide drops in force now (expired ones left out).
  std::map<std::string, NodeDrop> node_dropped() const { return measure_.node_dropped(); }
  // The back-off of the run's processes, by pid (empty when its collectors run).
  std::map<pid_t, Backoff> RunBackoffs(int64_t run_id) const {
    return measure_.RunBackoffs(run_id);
  }
  // The owners RunManager delegates to (hooks for the daemon and tests).
  MeasurementController& measurement() { return measure_; }
  StepFeeder& steps() { return steps_; }

  const std::map<int64_t, std::unique_ptr<RunTracker>>& runs() const { return runs_; }
  // The job's name and world size as its first live rank's environment gave them (in memory
  // only: a resumed run reads them again from its ranks); empty when unknown.
  RunJobLabels JobLabels(int64_t run_id) const;
  // The step join of a data-parallel run (its ranks, lagging and stopped), or null.
  const StepJoin* step_join(int64_t run_id) const { return steps_.join(run_id); }
  RunTracker* FindActive(const std::string& id_or_key);
  const std::map<std::string, CollectorTotals>& collector_totals() const {
    return measure_.totals();
  }
  uint64_t runs_closed() const { return runs_closed_; }
  uint64_t runs_crashed() const { return runs_crashed_; }  // of runs_closed()
  uint64_t store_errors() const { return persistence_.store_errors(); }
  // Runs whose changes wait in memory for a store that cannot write them (active runs with
  // unsaved changes after a failed write, and closed runs not yet written).
  size_t unsaved_runs() const { return persistence_.unsaved_runs(); }
  // Closed runs dropped unsaved because more than max_unsaved_closed waited.
  uint64_t runs_lost() const { return persistence_.runs_lost(); }
  // Runs this start could not restore (run_persistence.h): set aside, the others resumed.
  const std::vector<SetAsideRun>& set_aside() const { return persistence_.set_aside(); }
  uint64_t runs_set_aside() const { return persistence_.set_aside().size(); }
  size_t processes() const { return registry_.size(); }
  // Iteration events dropped because the source never announced their pid.
  uint64_t unannounced_events() const { return registry_.unannounced_events(); }

 private:
  // The announced process of an event, or null (counted and dropped: process_registry.h).
  Proc* ProcFor(pid_t pid) { return registry_.ForEvent(pid); }
  RunTracker* TrackerFor(const Proc& proc);
  // The process's begin hooks follow its run's need; its collectors close once the run's count
  // budget is spent.
  void UpdateHooks(pid_t pid, Proc& proc, RunTracker& tracker);
  bool Live() const { return source_ == nullptr || source_->pids_are_live(); }
  // The iteration's share of the node's energy over [begin, end] (energy_attribution.h: shared
  // with the runs whose iterations overlap it; whole: a data-parallel step, which stands for
  // every rank). nullopt and *wait when another run's overlapping iterations are not reported
  // yet (unless last_try: then refused as shared, counted); nullopt when the sampler does not
  // cover it (counted).
  std::optional<double> NodeEnergy(int64_t run_id, RunTracker& tracker, const IterationEnd& e,
                                   bool whole, bool last_try, bool* wait);
  // The energy of (pid, iter) over [begin, end] if it can be given now; else it is parked
  // (*later = true) and settled by SettleParked at a later sample.
  std::optional<double> EnergyOrPark(int64_t run_id, RunTracker& tracker, const IterationEnd& e,
                                     bool whole, bool* later);
  // Settles the parked iterations that can be given their energy now, and refuses those that
  // waited past EnergyAttribution::kShareWaitNs; with `run` set, every parked iteration of that
  // run (it closes: those still uncovered or unshared get none, counted).
  void SettleParked(std::optional<int64_t> run = std::nullopt);
  struct Parked {
    int64_t run_id;
    IterationEnd span;  // pid and iter as the tracker knows them, begin and end
    bool whole;
  };
  std::vector<Parked> parked_;
  // The iteration's CPU time now if the sampler covers its end, else parked until it does.
  void CpuOrPark(int64_t run_id, RunTracker& tracker, const IterationEnd& e);
  // Gives the parked iterations covered now their CPU time; with `pid` (it exited), every
  // parked one of it (those uncovered get none); with `run` (it closes), every one of the run.
  void SettleCpuParked(std::optional<pid_t> pid = std::nullopt,
                       std::optional<int64_t> run = std::nullopt);
  struct CpuParked {
    int64_t run_id;
    pid_t pid;
    uint64_t iter, begin_ns, end_ns;
  };
  std::vector<CpuParked> cpu_parked_;
  ProcessCpuSampler cpu_;
  void CloseRun(int64_t run_id, RunState state, const std::string& reason);
  int64_t NewRunId() { return persistence_.NewRunId(runs_.empty() ? 0 : runs_.rbegin()->first); }

  RunPersistence persistence_;
  RunManagerOptions options_;
  IterationSource* source_ = nullptr;
  std::function<void(RunSnapshot)> on_closed_;
  std::map<int64_t, std::unique_ptr<RunTracker>> runs_;  // active runs by id
  std::map<int64_t, int64_t> idle_since_ns_;             // runs with no live process
  ProcessRegistry registry_;
  std::map<int64_t, RunJobLabels> job_labels_;  // by run id
  MeasurementController measure_;
  StepFeeder steps_;
  EnergySampler* energy_ = nullptr;
  EnergyAttribution attribution_;
  uint64_t runs_closed_ = 0;
  uint64_t runs_crashed_ = 0;
};

}  // namespace seqpoint::daemon
