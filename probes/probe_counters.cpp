// See probe_counters.h.
#include "probes/probe_counters.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

namespace seqpoint::probes {
namespace {

// The threads of `pid` listed under <proc_root>/PID/task.
Result<std::set<pid_t>> ListThreads(const std::string& proc_root, int pid) {
  const std::string dir = proc_root + "/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return NotFound("process " + std::to_string(pid) + " has exited");
    return IoError("listing " + dir + ": " + std::strerror(errno));
  }
  std::set<pid_t> tids;
  while (dirent* ent = readdir(d)) {
    pid_t tid = 0;
    const char* end = ent->d_name + std::strlen(ent->d_name);
    auto [p, ec] = std::from_chars(ent->d_name, end, tid);
    if (ec == std::errc() && p == end && tid > 0) tids.insert(tid);
  }
  closedir(d);
  return tids;
}

Status OpenError(int err, const ProbeCounterEvent& event, pid_t tid) {
  const std::string what = "perf_event_open(" + event.name + ", tid " + std::to_string(tid) +
                           ") for the probe counters: " + std::strerror(err);
  switch (err) {
    case ESRCH:
      return NotFound(what + " (the thread has exited)");
    case EACCES:
    case EPERM:
      return PermissionDenied(what + " (run seqpointd as root or with CAP_PERFMON)");
    case EMFILE:
    case ENFILE:
      return Unavailable(what + " (out of file descriptors: raise LimitNOFILE)");
    default:
      return Unsupported(what + " (the kernel refuses this event here; the user-space perf "
                                "collector counts it instead)");
  }
}

}  // namespace

Status ProbeCounters::Arm(int pid, const std::vector<ProbeCounterEvent>& events) {
  if (events.empty() || events.size() > SP_MAX_COUNTERS) {
    return InvalidArgument("probe counters: " + std::to_string(events.size()) +
                           " events for pid " + std::to_string(pid) + "; 1 to " +
                           std::to_string(SP_MAX_COUNTERS) + " are supported");
  }
  for (const ProbeCounterEvent& e : events) {
    if (e.type != PERF_TYPE_SOFTWARE) {
      return InvalidArgument("probe counters: " + e.name +
                             " is not a software event; hardware events are counted by the "
                             "user-space perf collector");
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
  if (!switch_link_) {
    auto link = skel_->AttachSchedSwitch();
    if (!link.ok()) return link.status();
    switch_link_ = std::move(*link);
  }
  Proc& proc = procs_[pid];
  proc.events = events;
  // The process first: from here its threads' runs without events are counted, so a thread
  // created while the listing below runs is registered by the next Refresh().
  sp_counter_proc state{};
  state.count = static_cast<uint32_t>(events.size());
  if (bpf_map_update_elem(skel_->counter_procs_fd(), &pid, &state, BPF_ANY) != 0) {
    Status s = LibbpfError("registering pid " + std::to_string(pid) +
                               " for probe counters (at most 1024 processes)",
                           errno);
    Disarm(pid);
    return s;
  }
  Status s = RegisterThreads(pid, proc, /*first=*/true);
  if (!s.ok()) {
    Disarm(pid);
    return s;
  }
  return Status::Ok();
}

Status ProbeCounters::RegisterThreads(int pid, Proc& proc, bool first) {
  sp_counter_proc state{};
  if (!ReadProc(pid, &state)) return Internal("probe counters: pid " + std::to_string(pid) +
                                              " is not registered");
  auto tids = ListThreads(proc_root_, pid);
  if (!tids.ok()) return tids.status();
  for (auto it = proc.threads.begin(); it != proc.threads.end();) {
    if (tids->count(it->first) > 0) {
      ++it;
      continue;
    }
    ForgetThread(it->first, it->second);  // exited: its last switch-out banked its counts
    it = proc.threads.erase(it);
  }
  for (pid_t tid : *tids) {
    if (proc.threads.count(tid) > 0) continue;
    Status s = OpenThread(pid, tid, proc);
    if (s.code() == ErrorCode::kNotFound) continue;  // exited since listed
    if (!s.ok() && (first || s.code() != ErrorCode::kUnavailable)) return s;
  }
  proc.uncounted_seen = state.uncounted_runs;
  return Status::Ok();
}

Result<uint32_t> ProbeCounters::TakeSlot() {
  if (!free_slots_.empty()) {
    uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  if (next_slot_ >= SP_MAX_COUNTER_THREADS) {
    return Unavailable("probe counters: " + std::to_string(SP_MAX_COUNTER_THREADS) +
                       " threads are counted already (the perf event array is full)");
  }
  return next_slot_++;
}

Status ProbeCounters::OpenThread(int pid, pid_t tid, Proc& proc) {
  auto slot = TakeSlot();
  if (!slot.ok()) return slot.status();
  Thread thread;
  thread.slot = *slot;
  for (size_t i = 0; i < proc.events.size(); ++i) {
    const ProbeCounterEvent& e = proc.events[i];
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = e.type;
    attr.config = e.config;
    attr.exclude_hv = 1;
    // Counting from open, not inherited: bpf_perf_event_read_value refuses inherited events.
    long fd = ::syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
      Status s = OpenError(errno, e, tid);
      ForgetThread(tid, thread);
      return s;
    }
    thread.fds.push_back(static_cast<int>(fd));
    uint32_t index = thread.slot * SP_MAX_COUNTERS + static_cast<uint32_t>(i);
    int perf_fd = static_cast<int>(fd);
    if (bpf_map_update_elem(skel_->counter_events_fd(), &index, &perf_fd, BPF_ANY) != 0) {
      Status s = LibbpfError("putting " + e.name + " of tid " + std::to_string(tid) +
                                 " into the probes' perf event array",
                             errno);
      ForgetThread(tid, thread);
      return s;
    }
  }
  // Last, so the probes never see a thread whose events are not all in place.
  sp_counter_thread entry{};
  entry.pid = static_cast<uint32_t>(pid);
  entry.slot = thread.slot;
  if (bpf_map_update_elem(skel_->counter_threads_fd(), &tid, &entry, BPF_ANY) != 0) {
    Status s = LibbpfError("registering tid " + std::to_string(tid) + " for probe counters", errno);
    ForgetThread(tid, thread);
    return s;
  }
  proc.threads.emplace(tid, std::move(thread));
  ++proc.registrations;
  return Status::Ok();
}

void ProbeCounters::ForgetThread(pid_t tid, Thread& thread) {
  bpf_map_delete_elem(skel_->counter_threads_fd(), &tid);
  for (size_t i = 0; i < thread.fds.size(); ++i) {
    uint32_t index = thread.slot * SP_MAX_COUNTERS + static_cast<uint32_t>(i);
    bpf_map_delete_elem(skel_->counter_events_fd(), &index);
    ::close(thread.fds[i]);
  }
  thread.fds.clear();
  free_slots_.push_back(thread.slot);
}

void ProbeCounters::Disarm(int pid) {
  auto it = procs_.find(pid);
  if (it == procs_.end()) return;
  bpf_map_delete_elem(skel_->counter_procs_fd(), &pid);  // the probes stop reading it first
  for (auto& [tid, thread] : it->second.threads) ForgetThread(tid, thread);
  // Begins of its iterations that will not end with counters now.
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
  procs_.erase(it);
  if (procs_.empty()) switch_link_.reset();  // no context-switch cost while nobody is armed
}

void ProbeCounters::DisarmAll() {
  while (!procs_.empty()) Disarm(procs_.begin()->first);
}

const std::vector<ProbeCounterEvent>* ProbeCounters::EventsOf(int pid) const {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : &it->second.events;
}

void ProbeCounters::Refresh() {
  for (auto& [pid, proc] : procs_) {
    sp_counter_proc state{};
    if (!ReadProc(pid, &state) || state.uncounted_runs == proc.uncounted_seen) continue;
    (void)RegisterThreads(pid, proc, /*first=*/false);  // a gone process is detached by its owner
  }
}

bool ProbeCounters::ReadProc(int pid, sp_counter_proc* out) const {
  return bpf_map_lookup_elem(skel_->counter_procs_fd(), &pid, out) == 0;
}

ProbeCounterProcStats ProbeCounters::StatsOf(int pid) const {
  ProbeCounterProcStats s;
  auto it = procs_.find(pid);
  if (it == procs_.end()) return s;
  s.threads = it->second.threads.size();
  s.registrations = it->second.registrations;
  sp_counter_proc state{};
  if (ReadProc(pid, &state)) {
    s.uncounted_runs = state.uncounted_runs;
    s.read_errors = state.read_errors;
  }
  return s;
}

}  // namespace seqpoint::probes
