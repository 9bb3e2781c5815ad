// RunManager: the daemon's IterationSink. Groups the announced processes (process_registry.h:
// by pid and start time; events of pids never announced are counted and dropped) into runs
// (runs.group_by), feeds each run's RunTracker, runs the collectors around the iterations the
// selector chose, closes runs when their processes exit (marking crashes), and persists and
// resumes them through RunPersistence (run_persistence.h: one transaction per flush; a run that
// cannot be restored is set aside, the daemon starts).
//
// Collectors: one CollectorSet per process, opened on the process's first chosen iteration and
// closed when its run has spent a count budget (then begin hooks are turned off and only the
// probes' end records are consumed, batched; a paced budget keeps them on).
//
// Energy (run_manager_energy.cpp): with an EnergySampler, every timed iteration gets its share
// of the node's energy over its probe timestamps (energy_attribution.h says whose it is; a
// data-parallel step gets the node's whole energy over the step), never read on the iteration
// path: an iteration that ended after the last sample waits for the next one. The sampler
// replaces the energy collector on SeqPoints.
//
// Observer effect: the collectors skip the control iterations (observer_effect.h). After each
// measured iteration the run's estimate is consulted; once flagged it is logged once, and with
// observer_drop the collectors it blames are dropped for the rest of that run (time and energy
// go on).
//
// Profilers (collector_backoff.h, profiler_watch.h): ScanProfilers() (a daemon timer) looks
// for a profiler on every watched process; while one is there, or a vendor library answered
// that its counters are busy, or the node is paused (PauseCollectors), that process's collectors
// stay closed; they open again at the next chosen iteration after the hold-down or the resume.
//
// Data-parallel runs (step_join.h): a run with several live ranks, or whose launcher announces
// several on this node, feeds its tracker steps, not rank-iterations: each step's decision is
// taken once and its collectors run on every rank; steps are reported under the run's lead pid.
// A run of one process is fed exactly as before.
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
#include "agent/runs/collector_backoff.h"
#include "agent/runs/counter_windows.h"
#include "agent/runs/process_registry.h"
#include "agent/runs/profiler_watch.h"
#include "agent/runs/run_persistence.h"
#include "agent/runs/run_tracker.h"
#include "agent/runs/step_join.h"
#include "agent/source/iteration_source.h"
#include "agent/source/run_key.h"
#include "agent/store/store.h"
#include "collectors/collector_set.h"
#include "selector/online_selector.h"

namespace seqpoint::daemon {

using CollectorSetFactory = std::function<std::vector<std::unique_ptr<collectors::Collector>>()>;

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
  // An active run's stored iteration log is replaced by a checkpoint once it holds this many
  // entries (40 bytes each: 2.5 MiB by default; docs/bounds.md).
  uint64_t checkpoint_every = 65536;
  // Closed runs kept in memory while the store cannot write them; past it the oldest is lost
  // (counted in runs_lost()).
  size_t max_unsaved_closed = 64;
};

// Totals per collector over every process measured since the daemon started.
struct CollectorTotals {
  uint64_t ok = 0;
  uint64_t failed = 0;
  double cost_us = 0;
  std::string state;       // of the most recently opened set
  std::string last_error;  // open or measurement error, empty when healthy
};

// A collector dropped node-wide (runs.observer_effect_node_drop_s > 0) by the run that found it
// perturbing, until the drop expires.
struct NodeDrop {
  int64_t run_id = 0;
  int64_t until_unix_ns = 0;
};

class RunManager : public IterationSink {
 public:
  RunManager(Store* store, CollectorSetFactory collectors, RunManagerOptions options);
  // The source is told when a process's begin hooks are worth having.
  void set_source(IterationSource* source) { source_ = source; }
  // Called with the final snapshot of every run that closes (the uploader spools it).
  void set_on_run_closed(std::function<void(RunSnapshot)> fn) { on_closed_ = std::move(fn); }
  // Per-iteration energy from this sampler (null: none). Not owned; outlives the manager.
  // The manager settles parked iterations after each of the sampler's samples (its on_sample
  // callback): the sampler must not sample once the manager is gone.
  void set_energy_sampler(EnergySampler* sampler);
  // Iterations whose energy waits for the sampler's next sample (never read on the iteration
  // path: an iteration that ended after the last sample is parked, then settled).
  size_t energy_parked() const { return parked_.size(); }
  EnergySampler* energy_sampler() const { return energy_; }
  const RunManagerOptions& options() const { return options_; }

  // Restores the active runs of the store; closes those whose processes are all gone.
  Status Resume();
  // Writes every run's changes, all runs in one transaction (run_persistence.h).
  Status Flush();
  // Closes runs that have had no live process for idle_timeout_s.
  void CloseIdleRuns();
  // New options apply to runs created from now on (a reload).
  void Reconfigure(const RunManagerOptions& options);

  void OnProcessFound(const ProcessInfo& process) override;
  void OnIterationBegin(const IterationBegin& begin) override;
  void OnIterationEnd(const IterationEnd& end) override;
  void OnProcessExit(const ProcessExit& exit) override;
  void OnIterationCounters(const IterationCounters& counters) override;
  // Where measured iterations' counter windows started (counter_windows.h).
  const CounterWindows& counter_windows() const { return windows_; }

  // Looks for profilers on every watched process (live pids only), starts and ends back-offs,
  // and lifts a pause whose duration has passed (run_manager_backoff.cpp).
  void ScanProfilers();
  // Closes every process's collectors until ResumeCollectors() or `duration_ns` from now.
  const PauseState& PauseCollectors(std::optional<int64_t> duration_ns);
  // True when a pause was lifted.
  bool ResumeCollectors();
  const CollectorBackoff& backoff() const { return backoff_; }
  // The node-wide drops in force now (expired ones left out).
  std::map<std::string, NodeDrop> node_dropped() const;
  // The back-off of the run's processes, by pid (empty when its collectors run).
  std::map<pid_t, Backoff> RunBackoffs(int64_t run_id) const;

  const std::map<int64_t, std::unique_ptr<RunTracker>>& runs() const { return runs_; }
  // The job's name and world size as its first live rank's environment gave them (in memory
  // only: a resumed run reads them again from its ranks); empty when unknown.
  RunJobLabels JobLabels(int64_t run_id) const;
  // The step join of a data-parallel run (its ranks, lagging and stopped), or null.
  const StepJoin* step_join(int64_t run_id) const;
  RunTracker* FindActive(const std::string& id_or_key);
  const std::map<std::string, CollectorTotals>& collector_totals() const { return totals_; }
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
  void UpdateHooks(pid_t pid, Proc& proc, RunTracker& tracker);
  // What the collectors of one measured iteration read, and the counter group each held.
  struct Measured {
    std::vector<collectors::Sample> values;
    std::vector<CounterGroup> groups;
  };
  Measured EndMeasurement(pid_t pid, Proc& proc);
  // Opens (once) and begins the process's collectors for `iter` in counter group `group`.
  void StartCollectors(pid_t pid, Proc* proc, RunTracker* tracker, uint64_t iter, uint32_t group);
  // Data-parallel runs (run_manager_steps.cpp): each returns false when the process's run has
  // no step join (one process: fed as before), else feeds the join and acts on what it asks.
  void JoinFound(pid_t pid, Proc& proc, RunTracker& tracker);
  bool JoinBegin(const IterationBegin& b, Proc& proc, RunTracker& tracker);
  bool JoinEnd(const IterationEnd& e, Proc& proc, RunTracker& tracker, bool measured, Measured& m);
  bool JoinExit(const ProcessExit& x, int64_t run_id, RunTracker& tracker);
  void RunJoinActions(int64_t run_id, StepJoin& join, RunTracker& tracker);
  // A collector of `pid` answered busy (collectors::IsCountersBusy): back off.
  void NoteBusy(pid_t pid, Proc& proc, const std::string& collector, const Status& status);
  // Discards a measurement under way and releases the counters (a back-off or pause began).
  void StopCollectors(Proc& proc);
  // Looks for a profiler on one live process (at discovery, and on every ScanProfilers).
  void ScanProcess(pid_t pid, Proc& proc, int64_t mono_ns, int64_t wall_ns);
  // The node's energy over an iteration (whole: a data-parallel step, which stands for every
  // rank: never divided by the rank count) or over a rank-iteration (shared equally by the
  // run's live processes, energy_attribution.h); nullopt when another run shared the node or
  // nothing covered it (counted).
  std::optional<double> NodeEnergy(int64_t run_id, RunTracker& tracker, const IterationEnd& e,
                                   bool whole);
  // The energy of (pid, iter) over [begin, end] if the sampler covers its end now; else it is
  // parked (*later = true) and settled by SettleParked at the next sample.
  std::optional<double> EnergyOrPark(int64_t run_id, RunTracker& tracker, const IterationEnd& e,
                                     bool whole, bool* later);
  // Settles the parked iterations the sampler covers now; with `run` set, every parked
  // iteration of that run (it closes: those still uncovered get none, counted).
  void SettleParked(std::optional<int64_t> run = std::nullopt);
  struct Parked {
    int64_t run_id;
    IterationEnd span;  // pid and iter as the tracker knows them, begin and end
    bool whole;
  };
  std::vector<Parked> parked_;
  void CheckObserverEffect(int64_t run_id, RunTracker& tracker);
  void CloseRun(int64_t run_id, RunState state, const std::string& reason);
  int64_t NewRunId() { return persistence_.NewRunId(runs_.empty() ? 0 : runs_.rbegin()->first); }

  RunPersistence persistence_;
  CollectorSetFactory collector_factory_;
  RunManagerOptions options_;
  IterationSource* source_ = nullptr;
  std::function<void(RunSnapshot)> on_closed_;
  std::map<int64_t, std::unique_ptr<RunTracker>> runs_;  // active runs by id
  std::map<int64_t, int64_t> idle_since_ns_;             // runs with no live process
  ProcessRegistry registry_;
  std::map<int64_t, RunJobLabels> job_labels_;          // by run id
  std::map<int64_t, std::unique_ptr<StepJoin>> joins_;  // data-parallel runs, by id
  std::map<std::string, CollectorTotals> totals_;
  // Collectors some run on this node dropped for perturbing it, with observer_node_drop_s > 0:
  // later runs start without them until the drop expires (the same collector on the same node
  // perturbs again; on VMs that trap PMU access the slowdown outlives the measurement by
  // seconds). Cleared by Reconfigure (SIGHUP) and restart.
  std::map<std::string, NodeDrop> node_dropped_;
  EnergySampler* energy_ = nullptr;
  EnergyAttribution attribution_;
  CollectorBackoff backoff_;
  CounterWindows windows_;
  uint64_t runs_closed_ = 0;
  uint64_t runs_crashed_ = 0;
};

}  // namespace seqpoint::daemon
