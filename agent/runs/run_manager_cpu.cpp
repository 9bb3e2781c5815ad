// RunManager and the process CPU time of every iteration (process_cpu_sampler.h): the CPU
// counters' projections go through it (docs/estimators.md). As for energy
// (run_manager_energy.cpp), nothing is read on the iteration path: an iteration whose end is
// past its process's last sample is parked and given its CPU time after a later sample; one
// its process's samples never cover (it exited first) gets none, counted.
#include <algorithm>

#include "agent/runs/run_manager.h"

namespace seqpoint::daemon {

void RunManager::SampleProcessCpu() {
  if (cpu_.watched() == 0) return;
  cpu_.Sample();
  if (!cpu_parked_.empty()) SettleCpuParked();
}

void RunManager::CpuOrPark(int64_t run_id, RunTracker& tracker, const IterationEnd& e) {
  if (!cpu_.Watching(e.pid) || e.begin_ns == 0 || e.end_ns < e.begin_ns) return;
  if (!tracker.AwaitCpu(e.pid, e.iter)) return;
  if (cpu_.Covers(e.pid, e.end_ns) || cpu_.Ended(e.pid)) {
    tracker.SettleCpu(e.pid, e.iter, cpu_.CpuBetween(e.pid, e.begin_ns, e.end_ns));
    return;
  }
  // Bounded: an iteration parked longer than a ring's worth of samples is settled (without).
  if (cpu_parked_.size() >= ProcessCpuSampler::kRingSamples * std::max<size_t>(1, cpu_.watched())) {
    SettleCpuParked(cpu_parked_.front().pid);
  }
  cpu_parked_.push_back({run_id, e.pid, e.iter, e.begin_ns, e.end_ns});
}

void RunManager::SettleCpuParked(std::optional<pid_t> pid, std::optional<int64_t> run) {
  std::vector<CpuParked> waiting = std::move(cpu_parked_);
  cpu_parked_.clear();
  for (const CpuParked& p : waiting) {
    auto t = runs_.find(p.run_id);
    if (t == runs_.end()) continue;
    const bool last = (pid && p.pid == *pid) || (run && p.run_id == *run) || cpu_.Ended(p.pid);
    if (!last && !cpu_.Covers(p.pid, p.end_ns)) {
      cpu_parked_.push_back(p);
      continue;
    }
    t->second->SettleCpu(p.pid, p.iter, cpu_.CpuBetween(p.pid, p.begin_ns, p.end_ns));
  }
  if (pid) cpu_.Forget(*pid);
}

}  // namespace seqpoint::daemon
