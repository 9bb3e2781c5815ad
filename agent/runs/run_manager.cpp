#include "agent/runs/run_manager.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>

#include "agent/config/log.h"
#include "agent/source/run_key.h"
#include "common/clock.h"

namespace seqpoint::daemon {
namespace {

// A process's start (/proc/<pid>/stat field 22: clock ticks since boot) on CLOCK_MONOTONIC, the
// probes' clock (which stops during suspend, where CLOCK_BOOTTIME does not); 0 when unknown.
uint64_t StartMonotonicNs(uint64_t start_ticks) {
  const long hz = sysconf(_SC_CLK_TCK);
  if (start_ticks == 0 || hz <= 0) return 0;
  timespec boot{}, mono{};
  if (clock_gettime(CLOCK_BOOTTIME, &boot) != 0 || clock_gettime(CLOCK_MONOTONIC, &mono) != 0) {
    return 0;
  }
  const auto ns = [](const timespec& t) {
    return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
  };
  const int64_t suspended = ns(boot) - ns(mono);
  const int64_t start_boot =
      static_cast<int64_t>(start_ticks / static_cast<uint64_t>(hz)) * 1'000'000'000 +
      static_cast<int64_t>(start_ticks % static_cast<uint64_t>(hz)) * 1'000'000'000 / hz;
  return start_boot > suspended ? static_cast<uint64_t>(start_boot - suspended) : 0;
}

// Counter groups rotate per SeqPoint: CollectorSet gives each collector group
// visit % group_count(), where visit is the selector's Decision::group. With counter_groups at
// max_samples_per_point the selector numbers each bin's visits 0, 1, 2, ... (no bin gets more),
// so every collector rotates through its own groups, whatever their count, without the
// selector knowing the collectors (opened later, at the first measured iteration). Only the
// group numbers change: which iterations are measured does not, so logs replay identically.
RunManagerOptions WithGroupRotation(RunManagerOptions o) {
  o.selector.counter_groups = std::max<uint32_t>(1, o.selector.max_samples_per_point);
  return o;
}

MeasureOptions MeasureOptionsOf(const RunManagerOptions& o) {
  MeasureOptions m;
  m.proc_root = o.proc_root;
  m.observer_threshold = o.observer_threshold;
  m.observer_drop = o.observer_drop;
  m.observer_node_drop_s = o.observer_node_drop_s;
  m.profilers = o.profilers;
  m.profiler_hold_down_s = o.profiler_hold_down_s;
  m.gpu_sync = o.gpu_sync;
  return m;
}

}  // namespace

RunManager::RunManager(Store* store, CollectorSetFactory collectors, RunManagerOptions options)
    : persistence_(store, options.checkpoint_every, options.max_unsaved_closed),
      options_(WithGroupRotation(std::move(options))),
      measure_(&registry_, std::move(collectors), MeasureOptionsOf(options_)),
      steps_(
          &registry_, &measure_,
          [this](int64_t run_id, RunTracker& tracker, const IterationEnd& span, bool whole,
                 bool* later) { return EnergyOrPark(run_id, tracker, span, whole, later); },
          [this](pid_t pid, Proc& proc, RunTracker& tracker) { UpdateHooks(pid, proc, tracker); }) {
  // GPU values a later CUDA sync closed (measurement_gpu_sync.cpp): to the iteration they
  // measured, a data-parallel step's under its lead pid.
  measure_.set_on_late_values([this](pid_t pid, int64_t run_id, uint64_t iter,
                                     const std::vector<collectors::Sample>& values) {
    auto run = runs_.find(run_id);
    if (run == runs_.end()) return false;
    const StepJoin* join = steps_.join(run_id);
    const pid_t key = join != nullptr && !join->Direct(pid, iter) ? join->lead() : pid;
    return run->second->AddLateValues(key, iter, values);
  });
}

void RunManager::Reconfigure(const RunManagerOptions& options) {
  options_ = WithGroupRotation(options);
  persistence_.set_limits(options_.checkpoint_every, options_.max_unsaved_closed);
  measure_.Reconfigure(MeasureOptionsOf(options_));
  for (auto& [id, t] : runs_) t->set_control_every(options_.observer_control_every);
}

RunTracker* RunManager::TrackerFor(const Proc& proc) {
  auto it = runs_.find(proc.run_id);
  return it == runs_.end() ? nullptr : it->second.get();
}

void RunManager::OnProcessFound(const ProcessInfo& p) {
  const bool live = Live();
  uint64_t start =
      p.start_time || !live ? p.start_time : ProcessStartTime(options_.proc_root, p.pid);
  switch (registry_.Classify(p.pid, start)) {
    case ProcessRegistry::Announce::kKnown:
      return;  // announced again (an exec keeps the pid and the start time)
    case ProcessRegistry::Announce::kReused: {
      // The pid's previous process exited unseen and a new one took the pid: end the old one
      // (its run closes if it was the last) before the new one starts its own.
      SEQPOINT_LOG(kInfo, "pid " + std::to_string(p.pid) +
                              " was reused by a new process: the previous one ended unseen");
      OnProcessExit(ProcessExit{p.pid, false, std::nullopt, std::nullopt});
      break;
    }
    case ProcessRegistry::Announce::kNew:
      break;
  }
  std::string key = !p.run_key.empty()
                        ? p.run_key
                        : RunKeyFor(options_.group_by, options_.proc_root, p.pid, start);
  RunTracker* tracker = nullptr;
  for (auto& [id, t] : runs_) {
    if (t->record().key == key) tracker = t.get();
  }
  if (tracker == nullptr) {
    RunRecord r;
    r.key = key;
    r.started_unix_ns = r.updated_unix_ns = WallNs();
    // Numbered here, so a run exists before the store could write it: one that cannot be
    // written now is kept in memory and its row created by a later flush (run_manager_store.cpp).
    r.id = NewRunId();
    persistence_.Create(r);
    auto created = RunTracker::Create(r, options_.selector);
    if (!created.ok()) {
      SEQPOINT_LOG(kError, "cannot start run " + key + ": " + created.status().message());
      return;
    }
    tracker = created->get();
    tracker->set_control_every(options_.observer_control_every);
    measure_.ApplyNodeDrops(r.id, *tracker);
    runs_[r.id] = std::move(*created);
    SEQPOINT_LOG(kInfo, "run " + std::to_string(r.id) + " (" + key + ") started by pid " +
                            std::to_string(p.pid) + (p.comm.empty() ? "" : " (" + p.comm + ")"));
  }
  RunRecord& rec = tracker->record();
  if (std::find(rec.pids.begin(), rec.pids.end(), p.pid) == rec.pids.end()) {
    rec.pids.push_back(p.pid);
    rec.updated_unix_ns = WallNs();  // flushed with the next save
  }
  idle_since_ns_.erase(rec.id);
  if (live && !job_labels_.count(rec.id)) {
    RunJobLabels labels = JobLabelsFor(options_.proc_root, p.pid);
    if (labels.Any()) job_labels_[rec.id] = labels;  // every launch layer (run_key.h)
  }
  // Its start tells iterations missed before the probes attached from a numbering that starts
  // at a global step (a replayed trace's pids have no start here).
  if (live) tracker->SetProcessStart(p.pid, StartMonotonicNs(start));
  Proc& proc = registry_.Add(p.pid, start, rec.id);
  if (live) measure_.ScanProcess(p.pid, proc, MonotonicNs(), WallNs());  // profiled from start
  attribution_.ProcessFound(p.pid, rec.id, MonotonicNowNs());
  if (energy_ != nullptr) energy_->Sample();  // a bracket start now, not at the next tick
  if (live) cpu_.Watch(p.pid);  // its CPU clock: a first sample now (run_manager_cpu.cpp)
  steps_.Found(p.pid, proc, *tracker, live, options_.proc_root);
  UpdateHooks(p.pid, proc, *tracker);
}

void RunManager::UpdateHooks(pid_t pid, Proc& proc, RunTracker& tracker) {
  bool wanted = tracker.WantsBegins();
  if (wanted != proc.begin_hooks || !proc.begin_hooks) {
    proc.begin_hooks = wanted;
    if (source_ != nullptr) source_->SetBeginHooks(pid, wanted);
  }
  // Budget spent: release the counters (hooks off only until the next slot keep them open).
  if (!wanted && tracker.BudgetSpent()) measure_.CloseIfSpent(proc);
}

void RunManager::OnIterationBegin(const IterationBegin& b) {
  Proc* proc = ProcFor(b.pid);
  RunTracker* tracker = proc ? TrackerFor(*proc) : nullptr;
  if (tracker == nullptr) return;
  measure_.DiscardUnfinished(b.pid, *proc);  // its end never came
  proc->begin_probe_ns = b.begin_ns;
  if (steps_.Begin(b, *proc, *tracker)) return;  // a data-parallel run: its step decides
  selector::Decision d =
      tracker->Decide(b.pid, b.iter, b.seq_len, b.batch, static_cast<double>(b.tokens));
  // A control is timed like any chosen iteration, but no collector touches it.
  if (!d.measure || tracker->IsControl(b.pid, b.iter)) return;
  measure_.StartCollectors(b.pid, *proc, *tracker, b.iter, d.group);
}

void RunManager::OnIterationEnd(const IterationEnd& e) {
  Proc* proc = ProcFor(e.pid);
  RunTracker* tracker = proc ? TrackerFor(*proc) : nullptr;
  if (tracker == nullptr) return;
  bool measured = false;
  MeasurementController::Measured m =
      measure_.EndIteration(e.pid, *proc, e.iter, e.end_ns, &measured);
  // Every timed iteration may share the node's energy with other runs' (energy_attribution.h).
  // Only with a sampler: its samples settle and prune them (SettleParked); without one nothing
  // would ever forget them (one entry per iteration, for the daemon's life).
  if (energy_ != nullptr) attribution_.IterationTimed(e.pid, proc->run_id, e.begin_ns, e.end_ns);
  if (steps_.End(e, *proc, *tracker, measured, m)) return;  // a data-parallel run
  bool later = false;
  std::optional<double> energy = EnergyOrPark(proc->run_id, *tracker, e, /*whole=*/false, &later);
  tracker->Complete(e.pid, e.iter, e.seq_len, e.batch, static_cast<double>(e.tokens), e.begin_ns,
                    e.end_ns, m.values, energy, m.groups, later);
  CpuOrPark(proc->run_id, *tracker, e);
  measure_.CheckObserverEffect(proc->run_id, *tracker);
  UpdateHooks(e.pid, *proc, *tracker);
}

void RunManager::OnIterationCounters(const IterationCounters& c) {
  if (Proc* p = ProcFor(c.pid)) p->probe_counters = c;
}

void RunManager::OnProcessExit(const ProcessExit& x) {
  auto it = registry_.all().find(x.pid);
  if (it == registry_.all().end()) return;
  Proc& proc = it->second;
  const int64_t run_id = proc.run_id;
  measure_.ProcessExited(x.pid, proc);
  SettleCpuParked(x.pid);  // its clock is gone: what the samples cover, no more
  registry_.all().erase(it);
  const uint64_t now_mono = MonotonicNowNs();
  attribution_.ProcessExited(x.pid, now_mono);
  // End records arrive at most a poll interval late and an iteration older than the sampler's
  // ring has no energy anyway: an hour back is far beyond both.
  if (now_mono > 3'600'000'000'000) attribution_.Prune(now_mono - 3'600'000'000'000);
  auto run = runs_.find(run_id);
  if (run == runs_.end()) return;
  RunTracker& tracker = *run->second;
  // A data-parallel run's decisions are its steps': the other ranks still complete them.
  if (!steps_.Exit(x, run_id, tracker)) tracker.DropPending(x.pid);
  if (x.Crashed()) {
    tracker.record().state = RunState::kCrashed;
    tracker.record().end_reason = "pid " + std::to_string(x.pid) + " " + x.Describe();
    SEQPOINT_LOG(kWarn, "run " + std::to_string(run_id) + ": " + tracker.record().end_reason);
  }
  for (const auto& [pid, p] : registry_.all()) {
    if (p.run_id == run_id) return;  // other ranks still run
  }
  RunState state =
      tracker.record().state == RunState::kCrashed ? RunState::kCrashed : RunState::kFinished;
  std::string reason = state == RunState::kCrashed
                           ? tracker.record().end_reason
                           : "pid " + std::to_string(x.pid) + " " + x.Describe();
  CloseRun(run_id, state, reason);
}

void RunManager::CloseRun(int64_t run_id, RunState state, const std::string& reason) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  uint64_t last_end = 0;
  bool parked = false;
  for (const Parked& p : parked_) {
    if (p.run_id != run_id) continue;
    parked = true;
    last_end = std::max(last_end, p.span.end_ns);
  }
  if (energy_ != nullptr && parked) {
    // Its last iterations' energy: wait (here only) for the sample after them.
    energy_->SampleUntil(last_end, EnergySampler::kCloseWaitNs);
    SettleParked(run_id);  // and those still uncovered get none (counted)
  }
  SettleCpuParked(std::nullopt, run_id);  // the last iterations: what the samples cover
  RunTracker& tracker = *it->second;
  tracker.record().state = state;
  tracker.record().end_reason = reason;
  tracker.record().ended_unix_ns = tracker.record().updated_unix_ns = WallNs();
  // The daemon logs store trouble.
  const bool saved = persistence_.Save(tracker, /*fresh=*/true).ok();
  SelfCheck check = tracker.self_check();
  SEQPOINT_LOG(
      kInfo, "run " + std::to_string(run_id) + " (" + tracker.record().key + ") " +
                 std::string(RunStateName(state)) + ": " + reason + "; " +
                 std::to_string(tracker.record().iterations) + " iterations, " +
                 std::to_string(tracker.measured_iterations()) + " measured" +
                 (check.valid ? ", time projection error " + std::to_string(check.error * 100) + "%"
                              : ""));
  if (on_closed_) on_closed_(tracker.Snapshot());
  if (!saved) persistence_.KeepUnsaved(std::move(it->second));
  runs_.erase(it);
  steps_.Forget(run_id);
  idle_since_ns_.erase(run_id);
  job_labels_.erase(run_id);
  ++runs_closed_;
  if (state == RunState::kCrashed) ++runs_crashed_;
}

void RunManager::CloseIdleRuns() {
  const int64_t now = WallNs();
  if (Live()) {
    // A process whose exit event was lost: gone from /proc.
    std::vector<pid_t> gone;
    for (const auto& [pid, p] : registry_.all()) {
      if (!ProcessExists(options_.proc_root, pid)) gone.push_back(pid);
    }
    // Gone before the source read their exits (issue 19: exit events seen late on a loaded
    // node, or lost): the source's own exit path delivers each process's records still queued
    // (end records are batched in the kernel) before its exit, all of them at once so that it
    // ends them in the order they ended (a rank that died before the survivor is ended first:
    // the run says it went on without it). Ending them here first closed runs short, and those
    // records then came for a pid no longer known and were dropped.
    if (source_ != nullptr && !gone.empty()) source_->ProcessesGone(gone);
    std::map<int64_t, std::string> unordered;  // by run: pids ended here, in no known order
    for (pid_t pid : gone) {
      const Proc* p = registry_.Find(pid);
      if (p == nullptr) continue;
      std::string& pids = unordered[p->run_id];
      pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
    }
    for (const auto& [run_id, pids] : unordered) {
      if (pids.find(',') == std::string::npos) continue;  // one process: no order to get wrong
      SEQPOINT_LOG(kWarn, "run " + std::to_string(run_id) + ": pids " + pids +
                              " were found gone from /proc with no exit reported: the order in "
                              "which they ended is not known; they are ended in pid order");
    }
    for (pid_t pid : gone) {
      if (registry_.Find(pid) != nullptr) {
        OnProcessExit(ProcessExit{pid, false, std::nullopt, std::nullopt});
      }
    }
  }
  std::vector<int64_t> idle;
  for (const auto& [id, t] : runs_) {
    bool has_proc = false;
    for (const auto& [pid, p] : registry_.all()) has_proc = has_proc || p.run_id == id;
    if (has_proc) continue;
    auto [since, inserted] = idle_since_ns_.try_emplace(id, now);
    if (!inserted && now - since->second >= options_.idle_timeout_s * 1'000'000'000) {
      idle.push_back(id);
    }
  }
  for (int64_t id : idle) {
    CloseRun(id, RunState::kFinished,
             "no process seen for " + std::to_string(options_.idle_timeout_s) + " s");
  }
}

RunJobLabels RunManager::JobLabels(int64_t run_id) const {
  auto it = job_labels_.find(run_id);
  return it == job_labels_.end() ? RunJobLabels{} : it->second;
}

RunTracker* RunManager::FindActive(const std::string& id_or_key) {
  for (auto& [id, t] : runs_) {
    if (std::to_string(id) == id_or_key || t->record().key == id_or_key) return t.get();
  }
  return nullptr;
}

}  // namespace seqpoint::daemon
