// See straggler_book.h.
#include "agent/fleet/straggler_book.h"

namespace seqpoint::daemon::fleet {

void StragglerBook::AddRank(int64_t run, uint32_t pid, int32_t rank) {
  auto& join = joins_[run];
  if (join == nullptr) join = std::make_unique<StragglerJoin>(options_);
  join->AddRank(pid, rank);
  run_of_[pid] = run;
}

void StragglerBook::RemovePid(uint32_t pid) {
  auto it = run_of_.find(pid);
  if (it == run_of_.end()) return;
  if (auto j = joins_.find(it->second); j != joins_.end()) j->second->RemoveRank(pid);
  run_of_.erase(it);
}

void StragglerBook::OnIteration(uint32_t pid, uint64_t iter, uint64_t tokens, uint64_t begin_ns,
                                uint64_t end_ns) {
  auto it = run_of_.find(pid);
  if (it == run_of_.end()) return;
  joins_.at(it->second)->OnIteration(pid, iter, tokens, begin_ns, end_ns);
}

void StragglerBook::OnArrival(uint32_t pid, uint64_t ts_ns) {
  auto it = run_of_.find(pid);
  if (it == run_of_.end()) return;
  joins_.at(it->second)->OnArrival(pid, ts_ns);
}

void StragglerBook::Settle(uint64_t now_ns) {
  for (auto& [run, join] : joins_) join->Settle(now_ns);
}

void StragglerBook::EndRun(int64_t run) {
  joins_.erase(run);
  for (auto it = run_of_.begin(); it != run_of_.end();) {
    it = it->second == run ? run_of_.erase(it) : std::next(it);
  }
}

const StragglerJoin* StragglerBook::join(int64_t run) const {
  auto it = joins_.find(run);
  return it == joins_.end() ? nullptr : it->second.get();
}

}  // namespace seqpoint::daemon::fleet
