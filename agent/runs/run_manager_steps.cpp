// RunManager for data-parallel runs: the ranks' iterations go through the run's StepJoin
// (step_join.h), and the tracker is fed steps. Which runs: one that has two live processes, or
// whose first process's launcher announces two or more ranks on this node (LaunchRanksOf). A
// run of one process never gets a join, so it is fed exactly as before.
//
// Steps are fed to the tracker under the run's lead pid: the first of its processes still live
// when the join began (a process that ran alone before keeps its pid and its own iteration
// numbers, so the run's count of unobserved iterations goes on unbroken).
#include <algorithm>

#include "agent/config/log.h"
#include "agent/runs/run_manager.h"
#include "agent/source/run_key.h"

namespace seqpoint::daemon {

const StepJoin* RunManager::step_join(int64_t run_id) const {
  auto it = joins_.find(run_id);
  return it == joins_.end() ? nullptr : it->second.get();
}

void RunManager::JoinFound(pid_t pid, Proc& proc, RunTracker& tracker) {
  const bool live = source_ == nullptr || source_->pids_are_live();
  const LaunchRanks launch = live ? LaunchRanksOf(options_.proc_root, pid) : LaunchRanks{};
  proc.rank = launch.rank;
  const int64_t run_id = proc.run_id;
  if (auto it = joins_.find(run_id); it != joins_.end()) {
    it->second->AddRank(pid, launch.rank);
    RunJoinActions(run_id, *it->second, tracker);
    return;
  }
  std::vector<pid_t> others;
  for (const auto& [other, p] : registry_.all()) {
    if (other != pid && p.run_id == run_id) others.push_back(other);
  }
  if (others.empty() && launch.local_size < 2) return;  // one process: fed as before
  pid_t lead = pid;
  for (int32_t p : tracker.record().pids) {
    if (p == pid || std::find(others.begin(), others.end(), p) != others.end()) {
      lead = p;
      break;
    }
  }
  auto join = std::make_unique<StepJoin>(lead, launch.local_size);
  join->set_world_size(launch.world_size);
  // A process that ran alone so far: its iterations fed already stay as they were.
  const RunRecord& rec = tracker.record();
  const uint64_t next = rec.iterations > 0 ? rec.max_iter + 1 : 0;
  for (pid_t other : others) join->AddRank(other, registry_.all()[other].rank, next);
  join->AddRank(pid, launch.rank);
  SEQPOINT_LOG(kInfo, "run " + std::to_string(run_id) + " (" + rec.key +
                          ") is data-parallel: steps join its ranks' iterations" +
                          (launch.local_size
                               ? " (" + std::to_string(launch.local_size) + " ranks on this node)"
                               : "") +
                          (others.empty() ? "" : ", from iteration " + std::to_string(next)));
  StepJoin& j = *join;
  joins_[run_id] = std::move(join);
  RunJoinActions(run_id, j, tracker);
}

bool RunManager::JoinBegin(const IterationBegin& b, Proc& proc, RunTracker& tracker) {
  auto it = joins_.find(proc.run_id);
  if (it == joins_.end() || it->second->Direct(b.pid, b.iter)) return false;
  it->second->Begin(b.pid, b.iter, b.seq_len, b.batch, b.tokens, b.begin_ns);
  RunJoinActions(proc.run_id, *it->second, tracker);
  return true;
}

bool RunManager::JoinEnd(const IterationEnd& e, Proc& proc, RunTracker& tracker, bool measured,
                         Measured& m) {
  auto it = joins_.find(proc.run_id);
  if (it == joins_.end() || it->second->Direct(e.pid, e.iter)) return false;
  it->second->End(e.pid, e.iter, e.seq_len, e.batch, e.tokens, e.begin_ns, e.end_ns, measured,
                  std::move(m.values), std::move(m.groups));
  RunJoinActions(proc.run_id, *it->second, tracker);
  return true;
}

bool RunManager::JoinExit(const ProcessExit& x, int64_t run_id, RunTracker& tracker) {
  auto it = joins_.find(run_id);
  if (it == joins_.end()) return false;
  StepJoin& j = *it->second;
  j.RemoveRank(x.pid, x.Describe());
  RunJoinActions(run_id, j, tracker);
  size_t left = 0;
  for (const auto& [pid, r] : j.ranks()) left += r.status != RankStatus::kStopped;
  if (left > 0) {
    const auto rank = j.ranks().find(x.pid);
    const int32_t number = rank == j.ranks().end() ? -1 : rank->second.rank;
    const std::string line = "run " + std::to_string(run_id) + ": rank " +
                             (number >= 0 ? std::to_string(number) + " " : std::string()) +
                             "(pid " + std::to_string(x.pid) + ") " + x.Describe() +
                             "; the run goes on with " + std::to_string(left) + " rank" +
                             (left == 1 ? "" : "s");
    if (x.Crashed()) {
      SEQPOINT_LOG(kWarn, line);
    } else {
      SEQPOINT_LOG(kInfo, line);
    }
  }
  return true;
}

// Acts on what the join asks, in order: a step's decision (the tracker's, once, under the lead
// pid), the collectors of each rank of a chosen step, and each step done.
void RunManager::RunJoinActions(int64_t run_id, StepJoin& join, RunTracker& tracker) {
  bool stepped = false;
  for (auto actions = join.TakeActions(); !actions.empty(); actions = join.TakeActions()) {
    for (StepAction& a : actions) {
      if (a.kind == StepAction::Kind::kDecide) {
        const selector::Decision d = tracker.Decide(
            join.lead(), a.iter, a.step.seq_len, a.step.batch, static_cast<double>(a.step.tokens));
        // A control is timed like any chosen step, but no collector touches any of its ranks.
        join.Decided(a.iter, d.measure && !tracker.IsControl(join.lead(), a.iter), d.group);
      } else if (a.kind == StepAction::Kind::kMeasure) {
        auto p = registry_.all().find(a.pid);
        if (p == registry_.all().end() || p->second.run_id != run_id) continue;
        if (p->second.measuring) (void)EndMeasurement(a.pid, p->second);
        StartCollectors(a.pid, &p->second, &tracker, a.iter, a.group);
      } else {
        const JoinedStep& s = a.step;
        IterationEnd span;
        span.pid = join.lead();
        span.iter = s.iter;
        span.begin_ns = s.begin_ns;
        span.end_ns = s.end_ns;
        // The node's energy over the step, whole: the step stands for every rank.
        bool later = false;
        std::optional<double> energy = EnergyOrPark(run_id, tracker, span, /*whole=*/true, &later);
        tracker.Complete(join.lead(), s.iter, s.seq_len, s.batch, static_cast<double>(s.tokens),
                         s.begin_ns, s.end_ns, s.values, energy, s.groups, later);
        CheckObserverEffect(run_id, tracker);
        stepped = true;
      }
    }
  }
  if (!stepped) return;
  for (auto& [pid, p] : registry_.all()) {
    if (p.run_id == run_id) UpdateHooks(pid, p, tracker);
  }
}

}  // namespace seqpoint::daemon
