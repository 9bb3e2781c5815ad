#include "agent/runs/run_persistence.h"

#include <algorithm>
#include <utility>

#include "agent/config/log.h"
#include "common/clock.h"

namespace seqpoint::daemon {

Result<std::vector<std::unique_ptr<RunTracker>>> RunPersistence::LoadActive(
    const selector::OnlineOptions& options) {
  auto active = store_->ListRuns(true, 1 << 20);
  if (!active.ok()) return active.status();
  std::vector<std::unique_ptr<RunTracker>> out;
  for (const RunRecord& r : *active) {
    auto snap = store_->LoadRun(r.id);
    auto meas = store_->LoadMeasurements(r.id);
    auto log = store_->LoadIterationLog(r.id);
    auto checkpoint = store_->LoadCheckpoint(r.id);
    Status problem;
    for (const Status& st : {snap.status(), meas.status(), log.status(), checkpoint.status()}) {
      if (problem.ok() && !st.ok()) problem = st;
    }
    if (!problem.ok()) {
      SetAside(r, problem);
      continue;
    }
    auto tracker = RunTracker::Restore(*snap, *meas, *log, options, *checkpoint);
    if (!tracker.ok()) {
      SetAside(r, tracker.status());
      continue;
    }
    log_entries_[r.id] = log->size();  // a long log (an older seqpointd's) is checkpointed soon
    out.push_back(std::move(*tracker));
  }
  return out;
}

void RunPersistence::SetAside(const RunRecord& run, const Status& why) {
  SetAsideRun s{run.id, run.key, why.message(), WallNs()};
  const Status marked = store_->SetAsideRun(run.id, s.reason);
  // Logged once: at the start that found it. Marked in the store, later starts do not see it
  // among the active runs; if even that failed, the next start tries (and logs) again.
  SEQPOINT_LOG(
      kWarn,
      "run " + std::to_string(run.id) + " (" + run.key + ") set aside: it cannot be restored (" +
          s.reason + "); its stored totals stay readable with `seqpoint show " +
          std::to_string(run.id) + "`; the other runs resume" +
          (marked.ok()
               ? std::string()
               : " (marking it in the state database failed too: " + marked.message() + ")"));
  if (!marked.ok()) ++store_errors_;
  set_aside_.push_back(std::move(s));
}

void RunPersistence::Create(const RunRecord& record) {
  if (!store_->CreateRun(record).ok()) ++store_errors_;
}

int64_t RunPersistence::NewRunId(int64_t highest_active) {
  if (next_run_id_ == 0) {
    auto next = store_->NextRunId();
    next_run_id_ = next.ok() ? *next : 1;
  }
  // Above every run this daemon holds too (resumed, or created while the store could not write).
  next_run_id_ = std::max(next_run_id_, highest_active + 1);
  if (!closed_unsaved_.empty()) {
    next_run_id_ = std::max(next_run_id_, closed_unsaved_.rbegin()->first + 1);
  }
  return next_run_id_++;
}

RunPersistence::Pending RunPersistence::Take(RunTracker& tracker, bool fresh) {
  Pending p;
  p.tracker = &tracker;
  p.snapshot = tracker.Snapshot(fresh ? 0 : 1'000'000'000);
  p.measurements = tracker.TakeNewMeasurements();
  p.log = tracker.TakeNewLog();
  p.cost = tracker.TakeCostDeltas();
  const int64_t id = p.snapshot.run.id;
  const bool active = p.snapshot.run.state == RunState::kActive;
  if (active &&
      (checkpoint_due_.count(id) || log_entries_[id] + p.log.size() >= checkpoint_every_)) {
    p.checkpoint = tracker.Checkpoint();  // stands for every entry taken, these included
    p.log.clear();
  }
  return p;
}

void RunPersistence::Settle(Pending& p, bool saved) {
  const int64_t id = p.snapshot.run.id;
  if (!saved) {
    p.tracker->ReturnUnsaved(std::move(p.measurements), {}, std::move(p.cost));
    checkpoint_due_.insert(id);
    return;
  }
  p.tracker->MarkSaved();
  checkpoint_due_.erase(id);
  if (p.snapshot.run.state != RunState::kActive) {
    log_entries_.erase(id);
  } else {
    log_entries_[id] = p.checkpoint ? 0 : log_entries_[id] + p.log.size();
  }
}

Status RunPersistence::Write(std::vector<Pending>& pending) {
  if (pending.empty()) return Status::Ok();
  std::vector<RunSave> saves;
  saves.reserve(pending.size());
  for (const Pending& p : pending) {
    saves.push_back(
        {&p.snapshot, &p.measurements, &p.cost, &p.log, p.checkpoint ? &*p.checkpoint : nullptr});
  }
  Status st = store_->SaveRuns(saves);
  if (!st.ok()) ++store_errors_;
  for (Pending& p : pending) Settle(p, st.ok());
  return st;
}

Status RunPersistence::Save(RunTracker& tracker, bool fresh) {
  std::vector<Pending> one;
  one.push_back(Take(tracker, fresh));
  return Write(one);
}

void RunPersistence::KeepUnsaved(std::unique_ptr<RunTracker> tracker) {
  const int64_t id = tracker->record().id;
  checkpoint_due_.erase(id);  // closed: no log to cover
  log_entries_.erase(id);
  closed_unsaved_[id] = std::move(tracker);
  while (closed_unsaved_.size() > max_unsaved_) {
    SEQPOINT_LOG(kError, "run " + std::to_string(closed_unsaved_.begin()->first) +
                             " closed and was never saved: more than " +
                             std::to_string(max_unsaved_) +
                             " closed runs waited for the state database; dropped");
    closed_unsaved_.erase(closed_unsaved_.begin());
    ++runs_lost_;
  }
}

Status RunPersistence::Flush(const std::map<int64_t, std::unique_ptr<RunTracker>>& active) {
  std::vector<Pending> pending;
  for (auto& [id, t] : closed_unsaved_) pending.push_back(Take(*t, /*fresh=*/false));
  for (const auto& [id, t] : active) {
    // An idle run costs no write, unless a failed write left it owing a checkpoint.
    if (!t->HasUnsaved() && !checkpoint_due_.count(id)) continue;
    pending.push_back(Take(*t, /*fresh=*/false));
  }
  Status st = Write(pending);
  if (st.ok()) {
    closed_unsaved_.clear();
  } else {
    for (auto& [id, t] : closed_unsaved_) checkpoint_due_.erase(id);  // closed: no log to cover
  }
  return st;
}

}  // namespace seqpoint::daemon
