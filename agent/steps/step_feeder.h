// StepFeeder: data-parallel runs. A run with several live ranks, or whose launcher announces
// several on this node (LaunchRanksOf), gets a StepJoin (step_join.h): its ranks' iterations
// are joined into steps, and the run's tracker is fed steps, not rank-iterations. Each step's
// decision is taken once (the tracker's, under the run's lead pid) and its collectors run on
// every rank of a chosen step (MeasurementController). A run of one process never gets a join,
// so RunManager feeds it exactly as before (each call here answers false).
//
// The step's device and energy policy lives here and in the join:
//  - each device once per step: a device's reading (a GPU's energy, power, utilisation) is the
//    same device whichever rank read it, so the join takes it once; a process's counters add up
//    over the ranks (step_join.cpp);
//  - the node's energy over the step, whole: the step stands for every rank, so it is never
//    divided by the rank count (StepEnergy is asked with whole = true; it is shared only with
//    other runs whose iterations overlap the step, energy_attribution.h).
//
// Steps are fed under the run's lead pid: the first of its processes still live when the join
// began (a process that ran alone before keeps its pid and its own iteration numbers, so the
// run's count of unobserved iterations goes on unbroken).
//
// Threads: io_context thread only.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agent/measure/measurement_controller.h"
#include "agent/runs/process_registry.h"
#include "agent/source/iteration_source.h"
#include "agent/steps/step_join.h"

namespace seqpoint::daemon {

class RunTracker;

// Who else follows the ranks of data-parallel runs (the daemon's straggler book, agent/fleet):
// told when a rank joins a run's step join, when each rank-iteration of a joined run ends, when
// a rank exits and when the run ends. Every method runs on the io_context thread, inline.
class RankObserver {
 public:
  virtual ~RankObserver() = default;
  virtual void OnRank(int64_t run_id, pid_t pid, int32_t rank) = 0;
  virtual void OnRankIteration(int64_t run_id, const IterationEnd& end) = 0;
  virtual void OnRankExit(pid_t pid) = 0;
  virtual void OnRunEnd(int64_t run_id) = 0;
  // A collective's arrival in an attached process (RunManager forwards the source's).
  virtual void OnCollectiveArrival(uint32_t pid, uint64_t ts_ns) = 0;
};

class StepFeeder {
 public:
  // The node's energy over `span` for `run_id` (whole: a step, never divided by its ranks), or
  // nullopt with *later set when it waits for the sampler's next sample (RunManager's).
  using StepEnergy = std::function<std::optional<double>(
      int64_t run_id, RunTracker& tracker, const IterationEnd& span, bool whole, bool* later)>;
  // Called for every process of a run after its steps were fed (its begin hooks and its
  // collectors' budget, RunManager's).
  using AfterSteps = std::function<void(pid_t pid, Proc& proc, RunTracker& tracker)>;

  StepFeeder(ProcessRegistry* registry, MeasurementController* measure, StepEnergy energy,
             AfterSteps after_steps);

  // A process of the run was found: the run gets a join when it becomes data-parallel.
  // `live`: the pids are this node's (not a replay), so its launcher's environment is read.
  void Found(pid_t pid, Proc& proc, RunTracker& tracker, bool live, const std::string& proc_root);
  // Each returns false when the process's run has no step join (one process: fed as before),
  // else feeds the join and acts on what it asks.
  bool Begin(const IterationBegin& b, Proc& proc, RunTracker& tracker);
  bool End(const IterationEnd& e, Proc& proc, RunTracker& tracker, bool measured,
           MeasurementController::Measured& m);
  bool Exit(const ProcessExit& x, int64_t run_id, RunTracker& tracker);
  // The run closed.
  void Forget(int64_t run_id);
  // Not owned; null: none. Set before the first process is found.
  void set_rank_observer(RankObserver* observer) { observer_ = observer; }
  RankObserver* rank_observer() const { return observer_; }

  // The step join of a data-parallel run (its ranks, lagging and stopped), or null.
  const StepJoin* join(int64_t run_id) const;

 private:
  // Acts on what the join asks, in order: a step's decision, the collectors of each rank of a
  // chosen step, and each step done.
  void RunActions(int64_t run_id, StepJoin& join, RunTracker& tracker);

  ProcessRegistry* registry_;
  MeasurementController* measure_;
  StepEnergy energy_;
  AfterSteps after_steps_;
  RankObserver* observer_ = nullptr;
  std::map<int64_t, std::unique_ptr<StepJoin>> joins_;  // data-parallel runs, by id
};

}  // namespace seqpoint::daemon
