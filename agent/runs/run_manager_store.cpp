// RunManager and the store: resuming runs, saving them, and what happens when the store cannot
// be written (docs/bounds.md, docs/config.md "durability").
//
//  - Every flush writes each changed run in one transaction. An active run's iteration log is
//    replaced by a checkpoint of its tracker once options.checkpoint_every entries were stored
//    since the last one, so the log of a run of any length stays bounded.
//  - A failed write keeps the run's measurements and cost history in memory for the next flush;
//    the iteration-log entries it took are not kept (they would grow 40 bytes per iteration for
//    as long as the store fails): the next write that succeeds stores a checkpoint instead,
//    which covers them. A run closed meanwhile is kept (up to max_unsaved_closed) until then.
//  - Run ids are given here (the store's next id at start), so a run the store could not
//    create yet is still a run: status, /metrics and control see it, and its row is created by
//    its first save that succeeds.
// Logging of store trouble is the daemon's (once per change of the store's write health).
#include "agent/config/log.h"
#include "agent/runs/run_manager.h"
#include "common/clock.h"

namespace seqpoint::daemon {

Status RunManager::Resume() {
  auto active = store_->ListRuns(true, 1 << 20);
  if (!active.ok()) return active.status();
  const bool live = source_ == nullptr || source_->pids_are_live();
  // Processes whose probes the previous daemon left pinned: their records are still to come,
  // even from those gone since, so their runs stay open and know them from now on (the source
  // reports the gone ones' exits once it has delivered their records).
  std::map<pid_t, ProcessInfo> carried;
  if (source_ != nullptr) {
    for (const ProcessInfo& p : source_->CarriedOver()) carried[p.pid] = p;
  }
  for (const RunRecord& r : *active) {
    auto snap = store_->LoadRun(r.id);
    auto meas = store_->LoadMeasurements(r.id);
    auto log = store_->LoadIterationLog(r.id);
    auto checkpoint = store_->LoadCheckpoint(r.id);
    for (const Status& st : {snap.status(), meas.status(), log.status(), checkpoint.status()}) {
      if (!st.ok()) return st.WithContext("resuming run " + std::to_string(r.id));
    }
    auto tracker = RunTracker::Restore(*snap, *meas, *log, options_.selector, *checkpoint);
    if (!tracker.ok()) return tracker.status().WithContext("resuming run " + std::to_string(r.id));
    bool any_alive = !live || r.pids.empty();
    for (int32_t pid : r.pids) {
      any_alive = any_alive || ProcessExists(options_.proc_root, pid) || carried.count(pid) > 0;
    }
    (*tracker)->set_control_every(options_.observer_control_every);
    runs_[r.id] = std::move(*tracker);
    log_entries_[r.id] = log->size();  // a long log (an older seqpointd's) is checkpointed soon
    idle_since_ns_[r.id] = WallNs();
    if (!any_alive) {
      CloseRun(r.id, RunState::kFinished, "its processes ended while seqpointd was down");
    } else {
      SEQPOINT_LOG(kInfo, "resumed run " + std::to_string(r.id) + " (" + r.key + ") at " +
                              std::to_string(r.iterations) + " iterations");
      for (int32_t pid : r.pids) {
        auto c = carried.find(pid);
        if (c == carried.end()) continue;
        ProcessInfo p = c->second;
        p.run_key = r.key;
        OnProcessFound(p);
      }
    }
  }
  return Status::Ok();
}

int64_t RunManager::NewRunId() {
  if (next_run_id_ == 0) {
    auto next = store_->NextRunId();
    next_run_id_ = next.ok() ? *next : 1;
  }
  // Above every run this daemon holds too (resumed, or created while the store could not write).
  if (!runs_.empty()) next_run_id_ = std::max(next_run_id_, runs_.rbegin()->first + 1);
  if (!closed_unsaved_.empty()) {
    next_run_id_ = std::max(next_run_id_, closed_unsaved_.rbegin()->first + 1);
  }
  return next_run_id_++;
}

Status RunManager::SaveRun(RunTracker& tracker, bool fresh) {
  const int64_t id = tracker.record().id;
  RunSnapshot snap = tracker.Snapshot(fresh ? 0 : 1'000'000'000);
  auto m = tracker.TakeNewMeasurements();
  auto log = tracker.TakeNewLog();
  auto cost = tracker.TakeCostDeltas();
  const bool active = snap.run.state == RunState::kActive;
  uint64_t& stored = log_entries_[id];
  std::optional<std::string> checkpoint;
  if (active && (checkpoint_due_.count(id) || stored + log.size() >= options_.checkpoint_every)) {
    checkpoint = tracker.Checkpoint();  // stands for every entry taken, these included
    log.clear();
  }
  Status st = store_->SaveRun(snap, m, cost, log, checkpoint ? &*checkpoint : nullptr);
  if (!st.ok()) {
    ++store_errors_;
    tracker.ReturnUnsaved(std::move(m), {}, std::move(cost));
    checkpoint_due_.insert(id);
    return st;
  }
  tracker.MarkSaved();
  checkpoint_due_.erase(id);
  if (!active) {
    log_entries_.erase(id);
  } else {
    stored = checkpoint ? 0 : stored + log.size();
  }
  return st;
}

void RunManager::KeepUnsaved(std::unique_ptr<RunTracker> tracker) {
  const int64_t id = tracker->record().id;
  checkpoint_due_.erase(id);  // closed: no log to cover
  log_entries_.erase(id);
  closed_unsaved_[id] = std::move(tracker);
  while (closed_unsaved_.size() > options_.max_unsaved_closed) {
    SEQPOINT_LOG(kError, "run " + std::to_string(closed_unsaved_.begin()->first) +
                             " closed and was never saved: more than " +
                             std::to_string(options_.max_unsaved_closed) +
                             " closed runs waited for the state database; dropped");
    closed_unsaved_.erase(closed_unsaved_.begin());
    ++runs_lost_;
  }
}

Status RunManager::Flush() {
  Status first;
  for (auto it = closed_unsaved_.begin(); it != closed_unsaved_.end();) {
    Status st = SaveRun(*it->second, /*fresh=*/false);
    if (!st.ok()) {
      if (first.ok()) first = st;
      break;  // still failing: the rest wait for the next flush
    }
    it = closed_unsaved_.erase(it);
  }
  for (auto& [id, t] : runs_) {
    // An idle run costs no write, unless a failed write left it owing a checkpoint.
    if (!t->HasUnsaved() && !checkpoint_due_.count(id)) continue;
    Status st = SaveRun(*t);
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

}  // namespace seqpoint::daemon
