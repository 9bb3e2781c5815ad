// RunManager and the store: resuming the runs of a previous daemon, and flushing. What is
// written when, and what happens when the store cannot be written or a run cannot be
// restored, is RunPersistence's (run_persistence.h).
#include <set>

#include "agent/config/log.h"
#include "agent/runs/run_manager.h"
#include "common/clock.h"

namespace seqpoint::daemon {

Status RunManager::Resume() {
  auto restored = persistence_.LoadActive(options_.selector);
  if (!restored.ok()) return restored.status();
  const bool live = source_ == nullptr || source_->pids_are_live();
  // Processes whose probes the previous daemon left pinned: their records are still to come,
  // even from those gone since, so their runs stay open and know them from now on (the source
  // reports the gone ones' exits once it has delivered their records).
  std::map<pid_t, ProcessInfo> carried;
  if (source_ != nullptr) {
    for (const ProcessInfo& p : source_->CarriedOver()) carried[p.pid] = p;
  }
  std::set<pid_t> claimed;
  for (const auto& t : *restored) {
    for (int32_t pid : t->record().pids) claimed.insert(pid);
  }
  for (std::unique_ptr<RunTracker>& tracker : *restored) {
    const RunRecord r = tracker->record();
    bool any_alive = !live || r.pids.empty();
    for (int32_t pid : r.pids) {
      any_alive = any_alive || ProcessExists(options_.proc_root, pid) || carried.count(pid) > 0;
    }
    tracker->set_control_every(options_.observer_control_every);
    runs_[r.id] = std::move(tracker);
    idle_since_ns_[r.id] = WallNs();
    if (!any_alive) {
      CloseRun(r.id, RunState::kFinished, "its processes ended while seqpointd was down");
      continue;
    }
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
  // Carried-over processes of no resumed run (it was set aside, or closed before they were
  // announced): announced now, so their records are not dropped as unannounced.
  for (const auto& [pid, p] : carried) {
    if (!claimed.count(pid)) OnProcessFound(p);
  }
  return Status::Ok();
}

Status RunManager::Flush() { return persistence_.Flush(runs_); }

}  // namespace seqpoint::daemon
