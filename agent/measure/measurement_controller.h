// MeasurementController: the collectors around the iterations a run's selector chose. One
// CollectorSet per process (Proc::collectors), opened on the process's first chosen iteration,
// begun at the chosen iteration's begin and ended at its end, and closed when its run has spent
// a count budget (CloseIfSpent). RunManager (run_manager.h) owns the processes and the runs and
// calls this for everything that touches a collector; StepFeeder (steps/step_feeder.h) calls it
// for the ranks of a chosen step.
//
// Also owned here, because each one opens, stops or drops collectors:
//  - Profilers and busy counters (collector_backoff.h, profiler_watch.h;
//    measurement_backoff.cpp): ScanProfilers() looks for a profiler on every watched process;
//    while one is there, or a vendor library answered that its counters are busy, or the node
//    is paused (Pause), that process's collectors stay closed; they open again at the next
//    chosen iteration after the hold-down or the resume.
//  - The observer effect (observer_effect.h; measurement_observer.cpp): after each measured
//    iteration the run's estimate is consulted; once flagged it is logged once, and with
//    observer_drop the collectors it blames are dropped for the rest of that run (and, with
//    observer_node_drop_s > 0, from the node's later runs until the drop expires).
//  - Where each measured iteration's counter window started (counter_windows.h), and each
//    collector's totals since the daemon started.
//  - Where its GPU window ends (measurement_gpu_sync.cpp; collectors/gpu/sync_window.h): the
//    CPU collectors end at the iteration's end marker; the GPU collectors (nvml, rocm_smi,
//    gpu_metrics) end when the process's CUDA/HIP sync says the GPU finished what the CPU
//    queued: at once when a sync returned in the window's last 2 ms, else at its next sync
//    within 1 s (checked every few ms on the source's io_context, CallAfter), their values
//    then handed over late (set_on_late_values); with no sync in that bound, or none to see,
//    they are flagged "window not closed by a sync" and left out, counted by reason
//    (GpuWindowCounts: seqpoint_gpu_windows_total, `seqpoint status`).
//
// Threads: io_context thread only.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/measure/collector_backoff.h"
#include "agent/measure/counter_windows.h"
#include "agent/measure/profiler_watch.h"
#include "agent/runs/counter_group.h"
#include "agent/runs/process_registry.h"
#include "agent/source/iteration_source.h"
#include "collectors/collector_set.h"
#include "collectors/gpu/sync_window.h"

namespace seqpoint::daemon {

class RunTracker;

using CollectorSetFactory = std::function<std::vector<std::unique_ptr<collectors::Collector>>()>;

// Totals per collector over every process measured since the daemon started.
struct CollectorTotals {
  uint64_t ok = 0;
  uint64_t failed = 0;
  double cost_us = 0;
  std::string state;       // of the most recently opened set
  std::string last_error;  // open or measurement error, empty when healthy
  std::string description;  // Collector::Describe() of the last set measured
  std::string warnings;     // values its last measurement left out, and why (empty: none)
};

// A collector dropped node-wide (runs.observer_effect_node_drop_s > 0) by the run that found it
// perturbing, until the drop expires.
struct NodeDrop {
  int64_t run_id = 0;
  int64_t until_unix_ns = 0;
};

// The part of RunManagerOptions the collectors' control reads.
struct MeasureOptions {
  std::string proc_root = "/proc";
  // The GPU window rule's bound and tail (collectors/gpu/sync_window.h), and how often a
  // waiting window is checked.
  collectors::SyncWindow::Options gpu_sync;
  int64_t gpu_sync_check_ns = 2'000'000;
  double observer_threshold = 0.05;
  bool observer_drop = false;
  int64_t observer_node_drop_s = 0;
  ProfilerPatterns profilers;
  int64_t profiler_hold_down_s = 10;
};

class MeasurementController {
 public:
  // What the collectors of one measured iteration read, and the counter group each held.
  struct Measured {
    std::vector<collectors::Sample> values;
    std::vector<CounterGroup> groups;
  };

  MeasurementController(ProcessRegistry* registry, CollectorSetFactory factory,
                        MeasureOptions options);
  ~MeasurementController() { *alive_ = false; }
  MeasurementController(const MeasurementController&) = delete;
  MeasurementController& operator=(const MeasurementController&) = delete;
  void set_source(IterationSource* source) { source_ = source; }
  // A reload: the hold-down and the observer settings change, node-wide drops are cleared.
  void Reconfigure(MeasureOptions options);

  // Opens (once) and begins the process's collectors for `iter` in counter group `group`;
  // nothing while a back-off or pause blocks the process.
  void StartCollectors(pid_t pid, Proc& proc, RunTracker& tracker, uint64_t iter, uint32_t group);
  // Ends the measurement under way (its readings, counted in the totals). With cpu_end_ns (the
  // iteration's end marker) the GPU collectors follow the sync rule (file comment); without,
  // every collector ends now and the GPU values are left out (a discarded measurement).
  Measured EndMeasurement(pid_t pid, Proc& proc, std::optional<int64_t> cpu_end_ns = {});
  // At an iteration's begin: a measurement whose end never came is discarded.
  void DiscardUnfinished(pid_t pid, Proc& proc);
  // At an iteration's end: its measurement if the collectors measured it (*measured), with the
  // probes' counters of the same iteration; the probes' counters are consumed either way.
  Measured EndIteration(pid_t pid, Proc& proc, uint64_t iter, bool* measured);
  // The same, with the iteration's end marker (CLOCK_MONOTONIC): its GPU window follows the
  // sync rule (file comment).
  Measured EndIteration(pid_t pid, Proc& proc, uint64_t iter, uint64_t end_ns, bool* measured);
  // GPU values of a measured iteration whose window a later sync closed (pid, its run, the
  // iteration): the receiver adds them to the iteration (RunTracker::AddLateValues) and returns
  // false when it has no such iteration any more (counted, left out).
  using LateValues =
      std::function<bool(pid_t, int64_t, uint64_t, const std::vector<collectors::Sample>&)>;
  void set_on_late_values(LateValues fn) { on_late_values_ = std::move(fn); }
  // Decides every waiting GPU window that can be decided now (the timer's check; tests).
  void CheckGpuWindows();
  size_t gpu_windows_waiting() const { return gpu_waiting_.size(); }
  // The run spent its count budget: release the process's counters (unless mid-measurement).
  void CloseIfSpent(Proc& proc);
  // The process exited: its collectors close and its back-off is forgotten.
  void ProcessExited(pid_t pid, Proc& proc);

  // Profilers and busy counters (measurement_backoff.cpp).
  void ScanProcess(pid_t pid, Proc& proc, int64_t mono_ns, int64_t wall_ns);
  void ScanProfilers();
  // all = false: only the processes with a back-off (their profiler's going is seen at the
  // scan interval); the others are looked at when found and when their libraries change
  // (ScanPid), with a source that reports library loads (IterationSource).
  void ScanProfilers(bool all);
  void ScanPid(pid_t pid);
  const PauseState& Pause(std::optional<int64_t> duration_ns);
  bool Resume();
  const CollectorBackoff& backoff() const { return backoff_; }
  std::map<pid_t, Backoff> RunBackoffs(int64_t run_id) const;

  // The observer effect (measurement_observer.cpp): consulted after each timed iteration.
  void CheckObserverEffect(int64_t run_id, RunTracker& tracker);
  // A new run starts without the collectors dropped node-wide (logged).
  void ApplyNodeDrops(int64_t run_id, RunTracker& tracker) const;
  // The node-wide drops in force now (expired ones left out).
  std::map<std::string, NodeDrop> node_dropped() const;

  const std::map<std::string, CollectorTotals>& totals() const { return totals_; }
  const CounterWindows& windows() const { return windows_; }

 private:
  // A measured iteration whose GPU collectors wait for the process's sync.
  struct GpuWaiting {
    int64_t run_id = 0;
    uint64_t iter = 0;
    collectors::SyncWindow window;
  };
  // Counts a reading set into the totals (and backs off on busy counters): its samples.
  std::vector<collectors::Sample> Tally(pid_t pid, Proc& proc,
                                        const std::vector<collectors::CollectorReading>& readings,
                                        std::vector<CounterGroup>* groups);
  // The process's latest sync return, or nullopt and *why.
  std::optional<collectors::SyncReading> SyncMarkOf(pid_t pid, std::string* why);
  // Decides the waiting GPU window of `pid` if its verdict is in; with `cut` (its next window
  // or its exit is here) a window still waiting is decided as cut short. Values kept go to
  // *values when given, else to on_late_values_. True when decided (or none was waiting).
  bool DecideGpuWindow(pid_t pid, bool cut, std::vector<collectors::Sample>* values = nullptr);
  // Drops a window's GPU values, counting why (the verdict's note is kept for status).
  void FlagGpuWindow(const GpuWaiting& w, const std::vector<collectors::Sample>& values,
                     bool cut);
  void ScheduleGpuCheck();
  bool Live() const { return source_ == nullptr || source_->pids_are_live(); }
  // A collector of `pid` answered busy (collectors::IsCountersBusy): back off.
  void NoteBusy(pid_t pid, Proc& proc, const std::string& collector, const Status& status);
  // Discards a measurement under way and releases the counters (a back-off or pause began).
  void StopCollectors(Proc& proc);
  // Opens the process's collector set, less the run's dropped collectors and the events the
  // probes count; false when a collector answered busy (backed off).
  bool OpenCollectors(pid_t pid, Proc& proc, RunTracker& tracker);

  ProcessRegistry* registry_;
  CollectorSetFactory factory_;
  MeasureOptions options_;
  IterationSource* source_ = nullptr;
  std::map<std::string, CollectorTotals> totals_;
  // Collectors some run on this node dropped for perturbing it, with observer_node_drop_s > 0:
  // later runs start without them until the drop expires (the same collector on the same node
  // perturbs again; on VMs that trap PMU access the slowdown outlives the measurement by
  // seconds). Cleared by Reconfigure (SIGHUP) and restart.
  std::map<std::string, NodeDrop> node_dropped_;
  CollectorBackoff backoff_;
  CounterWindows windows_;
  std::map<pid_t, GpuWaiting> gpu_waiting_;
  LateValues on_late_values_;
  bool gpu_check_scheduled_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for CallAfter's callbacks
};

}  // namespace seqpoint::daemon
