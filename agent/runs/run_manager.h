// RunManager: the daemon's IterationSink. Groups processes into runs (runs.group_by), feeds each
// run's RunTracker, runs the collectors around the iterations the selector chose, closes runs
// when their processes exit (marking crashes), persists everything to the Store on Flush(), and
// resumes the active runs of a previous daemon on Resume().
//
// Collectors: one CollectorSet per process, opened on the process's first chosen iteration and
// closed when its run has spent its budget (then only the probes' end records are consumed,
// batched, and begin hooks are turned off: the cheapest mode).
//
// Energy: with an EnergySampler, every timed iteration gets its share of the node's energy over
// its probe timestamps (energy_attribution.h says whose it is), and the sampler replaces the
// energy collector on SeqPoints.
//
// Observer effect: the collectors skip the control iterations (observer_effect.h). After each
// measured iteration the run's estimate is consulted; once flagged it is logged once, and with
// observer_drop the collectors it blames are dropped for the rest of that run (time and energy
// go on).
//
// Threads: everything runs on the daemon's io_context thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config_validate.h"
#include "agent/energy/energy_attribution.h"
#include "agent/energy/energy_sampler.h"
#include "agent/source/iteration_source.h"
#include "agent/runs/run_tracker.h"
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
  double observer_threshold = 0.05;     // runs.observer_effect_threshold_pct / 100
  bool observer_drop = false;           // runs.observer_effect_action == "drop"
  uint32_t observer_control_every = 4;  // runs.observer_effect_control_every
};

// Totals per collector over every process measured since the daemon started.
struct CollectorTotals {
  uint64_t ok = 0;
  uint64_t failed = 0;
  double cost_us = 0;
  std::string state;       // of the most recently opened set
  std::string last_error;  // open or measurement error, empty when healthy
};

class RunManager : public IterationSink {
 public:
  RunManager(Store* store, CollectorSetFactory collectors, RunManagerOptions options);
  // The source is told when a process's begin hooks are worth having.
  void set_source(IterationSource* source) { source_ = source; }
  // Called with the final snapshot of every run that closes (the uploader spools it).
  void set_on_run_closed(std::function<void(RunSnapshot)> fn) { on_closed_ = std::move(fn); }
  // Per-iteration energy from this sampler (null: none). Not owned; outlives the manager.
  void set_energy_sampler(EnergySampler* sampler) { energy_ = sampler; }
  EnergySampler* energy_sampler() const { return energy_; }
  const RunManagerOptions& options() const { return options_; }

  // Restores the active runs of the store; closes those whose processes are all gone.
  Status Resume();
  // Writes every run's changes in one transaction per run.
  Status Flush();
  // Closes runs that have had no live process for idle_timeout_s.
  void CloseIdleRuns();
  // New options apply to runs created from now on (a reload).
  void Reconfigure(const RunManagerOptions& options);

  void OnProcessFound(const ProcessInfo& process) override;
  void OnIterationBegin(const IterationBegin& begin) override;
  void OnIterationEnd(const IterationEnd& end) override;
  void OnProcessExit(const ProcessExit& exit) override;

  const std::map<int64_t, std::unique_ptr<RunTracker>>& runs() const { return runs_; }
  RunTracker* FindActive(const std::string& id_or_key);
  const std::map<std::string, CollectorTotals>& collector_totals() const { return totals_; }
  uint64_t runs_closed() const { return runs_closed_; }
  uint64_t runs_crashed() const { return runs_crashed_; }  // of runs_closed()
  uint64_t store_errors() const { return store_errors_; }
  size_t processes() const { return procs_.size(); }

 private:
  struct Proc {
    int64_t run_id = 0;
    std::unique_ptr<collectors::CollectorSet> collectors;
    bool begin_hooks = false;
    std::optional<uint64_t> measuring;  // iteration the collectors are measuring
    bool rebuild = false;               // the run dropped a collector: reopen without it
  };
  Proc* ProcFor(pid_t pid);
  RunTracker* TrackerFor(const Proc& proc);
  void UpdateHooks(pid_t pid, Proc& proc, RunTracker& tracker);
  std::vector<collectors::Sample> EndMeasurement(Proc& proc);
  std::optional<double> IterationEnergy(int64_t run_id, RunTracker& tracker, const IterationEnd& e);
  void CheckObserverEffect(int64_t run_id, RunTracker& tracker);
  void CloseRun(int64_t run_id, RunState state, const std::string& reason);
  // fresh: recompute the projections first (closing); else they may be up to 1 s old.
  Status SaveRun(RunTracker& tracker, bool fresh = false);

  Store* store_;
  CollectorSetFactory collector_factory_;
  RunManagerOptions options_;
  IterationSource* source_ = nullptr;
  std::function<void(RunSnapshot)> on_closed_;
  std::map<int64_t, std::unique_ptr<RunTracker>> runs_;  // active runs by id
  std::map<int64_t, int64_t> idle_since_ns_;             // runs with no live process
  std::map<pid_t, Proc> procs_;
  std::map<std::string, CollectorTotals> totals_;
  // Collectors some run on this node dropped for perturbing it: later runs start without them
  // (the same collector on the same node perturbs again; on VMs that trap PMU access the
  // slowdown outlives the measurement by seconds). Cleared by Reconfigure (SIGHUP) and restart.
  std::map<std::string, int64_t> node_dropped_;  // collector -> run that dropped it
  EnergySampler* energy_ = nullptr;
  EnergyAttribution attribution_;
  uint64_t runs_closed_ = 0;
  uint64_t runs_crashed_ = 0;
  uint64_t store_errors_ = 0;
};

}  // namespace seqpoint::daemon
