// StepFeeder (step_feeder.h): the ranks' iterations go through the run's StepJoin, and the
// tracker is fed steps.
#include "agent/steps/step_feeder.h"

#include <algorithm>

#include "agent/config/log.h"
#include "agent/runs/run_tracker.h"
#include "agent/source/run_key.h"

namespace seqpoint::daemon {

StepFeeder::StepFeeder(ProcessRegistry* registry, MeasurementController* measure, StepEnergy energy,
                       AfterSteps after_steps)
    : registry_(registry),
      measure_(measure),
      energy_(std::move(energy)),
      after_steps_(std::move(after_steps)) {}

void StepFeeder::Forget(int64_t run_id) {
  if (joins_.erase(run_id) > 0 && observer_ != nullptr) observer_->OnRunEnd(run_id);
}

const StepJoin* StepFeeder::join(int64_t run_id) const {
  auto it = joins_.find(run_id);
  return it == joins_.end() ? nullptr : it->second.get();
}

void StepFeeder::Found(pid_t pid, Proc& proc, RunTracker& tracker, bool live,
                       const std::string& proc_root) {
  const LaunchRanks launch = live ? LaunchRanksOf(proc_root, pid) : LaunchRanks{};
  proc.rank = launch.rank;
  const int64_t run_id = proc.run_id;
  if (auto it = joins_.find(run_id); it != joins_.end()) {
    it->second->AddRank(pid, launch.rank);
    if (observer_ != nullptr) observer_->OnRank(run_id, pid, launch.rank);
    RunActions(run_id, *it->second, tracker);
    return;
  }
  std::vector<pid_t> others;
  for (const auto& [other, p] : registry_->all()) {
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
  for (pid_t other : others) join->AddRank(other, registry_->all()[other].rank, next);
  join->AddRank(pid, launch.rank);
  if (observer_ != nullptr) {
    for (pid_t other : others) observer_->OnRank(run_id, other, registry_->all()[other].rank);
    observer_->OnRank(run_id, pid, launch.rank);
  }
  SEQPOINT_LOG(kInfo, "run " + std::to_string(run_id) + " (" + rec.key +
                          ") is data-parallel: steps join its ranks' iterations" +
                          (launch.local_size
                               ? " (" + std::to_string(launch.local_size) + " ranks on this node)"
                               : "") +
                          (others.empty() ? "" : ", from iteration " + std::to_string(next)));
  StepJoin& j = *join;
  joins_[run_id] = std::move(join);
  RunActions(run_id, j, tracker);
}

bool StepFeeder::Begin(const IterationBegin& b, Proc& proc, RunTracker& tracker) {
  auto it = joins_.find(proc.run_id);
  if (it == joins_.end() || it->second->Direct(b.pid, b.iter)) return false;
  it->second->Begin(b.pid, b.iter, b.seq_len, b.batch, b.tokens, b.begin_ns);
  RunActions(proc.run_id, *it->second, tracker);
  return true;
}

bool StepFeeder::End(const IterationEnd& e, Proc& proc, RunTracker& tracker, bool measured,
                     MeasurementController::Measured& m) {
  auto it = joins_.find(proc.run_id);
  if (it == joins_.end() || it->second->Direct(e.pid, e.iter)) return false;
  if (observer_ != nullptr) observer_->OnRankIteration(proc.run_id, e);
  it->second->End(e.pid, e.iter, e.seq_len, e.batch, e.tokens, e.begin_ns, e.end_ns, measured,
                  std::move(m.values), std::move(m.groups));
  RunActions(proc.run_id, *it->second, tracker);
  return true;
}

bool StepFeeder::Exit(const ProcessExit& x, int64_t run_id, RunTracker& tracker) {
  auto it = joins_.find(run_id);
  if (it == joins_.end()) return false;
  StepJoin& j = *it->second;
  j.RemoveRank(x.pid, x.Describe());
  if (observer_ != nullptr) observer_->OnRankExit(x.pid);
  RunActions(run_id, j, tracker);
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
void StepFeeder::RunActions(int64_t run_id, StepJoin& join, RunTracker& tracker) {
  bool stepped = false;
  for (auto actions = join.TakeActions(); !actions.empty(); actions = join.TakeActions()) {
    for (StepAction& a : actions) {
      if (a.kind == StepAction::Kind::kDecide) {
        const selector::Decision d = tracker.Decide(
            join.lead(), a.iter, a.step.seq_len, a.step.batch, static_cast<double>(a.step.tokens));
        // A control is timed like any chosen step, but no collector touches any of its ranks.
        join.Decided(a.iter, d.measure && !tracker.IsControl(join.lead(), a.iter), d.group);
      } else if (a.kind == StepAction::Kind::kMeasure) {
        auto p = registry_->all().find(a.pid);
        if (p == registry_->all().end() || p->second.run_id != run_id) continue;
        measure_->DiscardUnfinished(a.pid, p->second);
        measure_->StartCollectors(a.pid, p->second, tracker, a.iter, a.group);
      } else {
        const JoinedStep& s = a.step;
        IterationEnd span;
        span.pid = join.lead();
        span.iter = s.iter;
        span.begin_ns = s.begin_ns;
        span.end_ns = s.end_ns;
        // The node's energy over the step, whole: the step stands for every rank.
        bool later = false;
        std::optional<double> energy = energy_(run_id, tracker, span, /*whole=*/true, &later);
        tracker.Complete(join.lead(), s.iter, s.seq_len, s.batch, static_cast<double>(s.tokens),
                         s.begin_ns, s.end_ns, s.values, energy, s.groups, later);
        measure_->CheckObserverEffect(run_id, tracker);
        stepped = true;
      }
    }
  }
  if (!stepped) return;
  for (auto& [pid, p] : registry_->all()) {
    if (p.run_id == run_id) after_steps_(pid, p, tracker);
  }
}

}  // namespace seqpoint::daemon
