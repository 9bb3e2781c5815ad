// See probe_counters.h.
#include "probes/probe_counters.h"

#include <bpf/bpf.h>
#include <linux/perf_event.h>
#include <signal.h>

#include <cerrno>

namespace seqpoint::probes {

uint32_t ProbeCounterKind(const ProbeCounterEvent& event) {
  if (event.type != PERF_TYPE_SOFTWARE) return 0;
  switch (event.config) {
    case PERF_COUNT_SW_TASK_CLOCK:
    case PERF_COUNT_SW_CPU_CLOCK:
      return SP_KIND_ON_CPU_NS;
    case PERF_COUNT_SW_CONTEXT_SWITCHES:
      return SP_KIND_SWITCHES;
    case PERF_COUNT_SW_CPU_MIGRATIONS:
      return SP_KIND_MIGRATIONS;
    case PERF_COUNT_SW_PAGE_FAULTS:
      return SP_KIND_FAULTS;
    case PERF_COUNT_SW_PAGE_FAULTS_MIN:
      return SP_KIND_MIN_FAULTS;
    case PERF_COUNT_SW_PAGE_FAULTS_MAJ:
      return SP_KIND_MAJ_FAULTS;
    default:
      return 0;
  }
}

Status ProbeCounters::Arm(int pid, const std::vector<ProbeCounterEvent>& events) {
  if (events.empty() || events.size() > SP_MAX_COUNTERS) {
    return InvalidArgument("probe counters: " + std::to_string(events.size()) + " events for pid " +
                           std::to_string(pid) + "; 1 to " + std::to_string(SP_MAX_COUNTERS) +
                           " are supported");
  }
  sp_counter_proc state{};
  state.count = static_cast<uint32_t>(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const ProbeCounterEvent& e = events[i];
    if (e.type != PERF_TYPE_SOFTWARE) {
      return InvalidArgument("probe counters: " + e.name +
                             " is not a software event; hardware events are counted by the "
                             "user-space perf collector");
    }
    state.kinds[i] = ProbeCounterKind(e);
    if (state.kinds[i] == 0) {
      return Unsupported("probe counters: " + e.name +
                         " is not one the probes count (task-clock, cpu-clock, "
                         "context-switches, cpu-migrations, page-faults, minor-faults, "
                         "major-faults); the user-space perf collector counts it instead");
    }
  }
  if (!skel_->counters_supported()) {
    return Unsupported("probe counters: " + skel_->counters_why_not());
  }
  if (auto it = procs_.find(pid); it != procs_.end()) {
    bool same = it->second.events.size() == events.size();
    for (size_t i = 0; same && i < events.size(); ++i) {
      same = it->second.events[i].name == events[i].name;
    }
    if (same) return Status::Ok();
    Disarm(pid);
  }
  if (::kill(pid, 0) != 0 && errno == ESRCH) {
    return NotFound("probe counters: process " + std::to_string(pid) + " has exited");
  }
  if (!switch_link_) {
    auto link = skel_->AttachSchedSwitch();
    if (!link.ok()) return link.status();
    switch_link_ = std::move(*link);
    auto exec = skel_->AttachCountersExec();
    if (!exec.ok()) {
      switch_link_.reset();
      return exec.status();
    }
    exec_link_ = std::move(*exec);
  }
  procs_[pid].events = events;
  // The process first, so the hook follows every thread from here; then the threads that exist
  // now are seeded (the hook's own records win).
  ForgetThreads(pid);  // a dead process's records under a reused pid
  if (bpf_map_update_elem(skel_->counter_procs_fd(), &pid, &state, BPF_ANY) != 0) {
    Status s = LibbpfError(
        "registering pid " + std::to_string(pid) + " for probe counters (at most 1024 processes)",
        errno);
    Disarm(pid);
    return s;
  }
  Status s = skel_->SeedCounterThreads(pid);
  if (!s.ok()) {
    Disarm(pid);
    return s;
  }
  return Status::Ok();
}

void ProbeCounters::ForgetThreads(int pid) {
  const int fd = skel_->counter_threads_fd();
  std::vector<uint64_t> tasks;  // keyed by task_struct address (iteration_probe.h)
  uint64_t key = 0, next = 0;
  const uint64_t* prev = nullptr;
  sp_counter_thread t{};
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    if (bpf_map_lookup_elem(fd, &next, &t) == 0 && t.pid == static_cast<uint32_t>(pid)) {
      tasks.push_back(next);
    }
    key = next;
    prev = &key;
  }
  for (uint64_t task : tasks) bpf_map_delete_elem(fd, &task);
}

void ProbeCounters::ForgetBegins(int pid) {
  const int fd = skel_->counter_begins_fd();
  std::vector<sp_inflight_key> stale;
  sp_inflight_key key{}, next{};
  const sp_inflight_key* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    if (next.pid == static_cast<uint32_t>(pid)) stale.push_back(next);
    key = next;
    prev = &key;
  }
  for (const sp_inflight_key& k : stale) bpf_map_delete_elem(fd, &k);
}

void ProbeCounters::Disarm(int pid) {
  auto it = procs_.find(pid);
  if (it == procs_.end()) return;
  bpf_map_delete_elem(skel_->counter_procs_fd(), &pid);  // the hook and probes stop first
  ForgetThreads(pid);
  ForgetBegins(pid);  // begins of its iterations that will not end with counters now
  procs_.erase(it);
  if (procs_.empty()) {  // no context-switch cost while nobody is armed
    switch_link_.reset();
    exec_link_.reset();
  }
}

void ProbeCounters::DisarmAll() {
  while (!procs_.empty()) Disarm(procs_.begin()->first);
}

const std::vector<ProbeCounterEvent>* ProbeCounters::EventsOf(int pid) const {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : &it->second.events;
}

bool ProbeCounters::ReadProc(int pid, sp_counter_proc* out) const {
  return bpf_map_lookup_elem(skel_->counter_procs_fd(), &pid, out) == 0;
}

ProbeCounterProcStats ProbeCounters::StatsOf(int pid) const {
  ProbeCounterProcStats s;
  sp_counter_proc state{};
  if (procs_.count(pid) == 0 || !ReadProc(pid, &state)) return s;
  s.running = state.running;
  s.unknown_runs = state.unknown_runs;
  s.untracked = state.untracked;
  s.execs = state.execs;
  s.snapshot_retries = state.snapshot_retries;
  s.unseen_runs = state.unseen_runs;
  return s;
}

}  // namespace seqpoint::probes
