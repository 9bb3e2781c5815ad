#include "agent/runs/process_registry.h"

namespace seqpoint::daemon {

ProcessRegistry::Announce ProcessRegistry::Classify(pid_t pid, uint64_t start_time) const {
  const Proc* p = Find(pid);
  if (p == nullptr) return Announce::kNew;
  if (start_time != 0 && p->start_time != 0 && start_time != p->start_time) {
    return Announce::kReused;
  }
  return Announce::kKnown;
}

Proc& ProcessRegistry::Add(pid_t pid, uint64_t start_time, int64_t run_id) {
  Proc& p = procs_[pid];
  p.run_id = run_id;
  if (start_time != 0) p.start_time = start_time;
  return p;
}

Proc* ProcessRegistry::ForEvent(pid_t pid) {
  Proc* p = Find(pid);
  if (p == nullptr) ++unannounced_;
  return p;
}

Proc* ProcessRegistry::Find(pid_t pid) {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : &it->second;
}

const Proc* ProcessRegistry::Find(pid_t pid) const {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : &it->second;
}

bool ProcessRegistry::HasRun(int64_t run_id) const {
  for (const auto& [pid, p] : procs_) {
    if (p.run_id == run_id) return true;
  }
  return false;
}

}  // namespace seqpoint::daemon
