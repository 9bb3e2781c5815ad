// See process_discovery.h.
#include "probes/discovery/process_discovery.h"

#include <bpf/libbpf.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/clock.h"
#include "probes/discovery/proc_reader.h"
#include "probes/discovery/process_watch.h"

namespace seqpoint::probes {
namespace {

uint64_t SecondsToNs(double s) { return static_cast<uint64_t>(s * 1e9); }

constexpr uint64_t kReexamineGapNs = 200'000'000;
// The kernel's count of lost lifecycle events is read at most this often (a map lookup on every
// CPU): a loss is answered by a rescan within a second, not at every wake-up.
constexpr uint64_t kStatsIntervalNs = 1'000'000'000;

// glibc's ld-linux-*.so.*, musl's ld-musl-*.so.1.
bool IsDynamicLinker(const std::string& path) {
  std::string base = BaseName(path);
  return base.starts_with("ld-linux") || base.starts_with("ld-musl") || base == "ld.so";
}

}  // namespace

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  ExitStatus x;
  if (WIFSIGNALED(wait_status)) {
    x.signal = WTERMSIG(wait_status);
    x.core_dumped = WCOREDUMP(wait_status);
  } else {
    x.exit_code = WEXITSTATUS(wait_status);
  }
  return x;
}

std::string ExitStatus::Describe() const {
  if (signal == 0) return "exit status " + std::to_string(exit_code);
  const char* abbrev = sigabbrev_np(signal);  // "KILL"; null for unnamed (real-time) signals
  return "killed by signal " + std::to_string(signal) +
         (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string()) +
         (core_dumped ? ", core dumped" : "");
}

ProcessDiscovery::ProcessDiscovery(DiscoveryOptions options, DiscoveryListener* listener)
    : options_(std::move(options)),
      listener_(listener),
      finder_(options_.proc_root, options_.zero_code) {}

ProcessDiscovery::~ProcessDiscovery() {
  ring_.reset();
  skel_.reset();
}

Result<std::unique_ptr<ProcessDiscovery>> ProcessDiscovery::Create(const DiscoveryOptions& options,
                                                                   DiscoveryListener* listener) {
  if (listener == nullptr) return InvalidArgument("ProcessDiscovery::Create: listener is null");
  auto skel = ProcessWatchSkeleton::Load("");
  if (!skel.ok()) return skel.status();
  std::unique_ptr<ProcessDiscovery> self(new ProcessDiscovery(options, listener));
  self->skel_ = std::move(*skel);
  ClearLibbpfLog();
  ring_buffer* rb =
      ring_buffer__new(self->skel_->events_fd(), &ProcessDiscovery::OnRecord, self.get(), nullptr);
  if (rb == nullptr) return LibbpfError("creating the process event consumer", errno);
  self->ring_.reset(rb);
  return self;
}

Status ProcessDiscovery::Start() {
  SEQPOINT_RETURN_IF_ERROR(skel_->AttachTracepoints());
  last_rescan_ns_ = last_liveness_ns_ = KernelMonotonicNs();
  if (options_.scan_at_start || options_.only_pid > 0) Rescan();
  return Status::Ok();
}

int ProcessDiscovery::OnRecord(void* ctx, void* data, size_t size) {
  auto* self = static_cast<ProcessDiscovery*>(ctx);
  if (size != sizeof(sp_proc_event)) return 0;
  sp_proc_event e;
  std::memcpy(&e, data, sizeof(e));
  int pid = static_cast<int>(e.pid);
  if (self->options_.only_pid > 0 && pid != self->options_.only_pid) return 0;
  switch (e.kind) {
    case SP_PROC_EXEC:
      ++self->stats_.execs;
      // A new image: the old probes mean nothing now. An exec from before the watch began
      // (queued while we examined the process) is the image we attached: nothing to undo.
      if (auto w = self->watched_.find(pid);
          w != self->watched_.end() && e.time_ns > w->second.since_ns) {
        self->Forget(pid);
        self->listener_->OnGone(pid, std::nullopt);
      }
      self->last_examined_.erase(pid);  // a new image is examined at once
      self->Schedule(pid);
      break;
    case SP_PROC_LIBS_CHANGED:
      ++self->stats_.library_loads;
      self->libs_changed_.insert(pid);
      self->Schedule(pid);
      break;
    case SP_PROC_EXIT:
      ++self->stats_.exits;
      self->pending_.erase(pid);
      self->last_examined_.erase(pid);
      self->libs_changed_.erase(pid);
      // Processes that ended before it and whose events were lost (or are behind in the ring)
      // are reported first: the order of ends is the kernel's, not the ring's.
      self->EndRecordedExits(e.time_ns, pid);
      self->skel_->TakeExit(pid);  // the event says it all
      if (self->watched_.count(pid) > 0) {
        self->Forget(pid);
        self->listener_->OnGone(pid, ExitStatus::FromWaitStatus(static_cast<int>(e.exit_status)));
      }
      break;
    default:
      break;
  }
  return 0;
}

Result<int> ProcessDiscovery::Poll(int timeout_ms) {
  // Without a wait, the ring is read from its mapping: no epoll_wait on every wake-up.
  int woken = timeout_ms == 0 ? 0 : ring_buffer__poll(ring_.get(), timeout_ms);
  if (woken < 0 && woken != -EINTR) return LibbpfError("polling the process event ring", woken);
  int rest = ring_buffer__consume(ring_.get());
  if (rest < 0) return LibbpfError("consuming the process event ring", rest);
  // Examine each due process once, however many libraries it loaded meanwhile.
  uint64_t now = KernelMonotonicNs();
  std::vector<int> due;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second <= now) {
      due.push_back(it->first);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  for (int pid : due) {
    last_examined_[pid] = now;
    Examine(pid);
    if (libs_changed_.erase(pid) > 0 && watched_.count(pid) > 0) {
      listener_->OnLibrariesChanged(pid);
    }
  }
  for (auto it = last_examined_.begin(); it != last_examined_.end();) {
    it = now - it->second > 2 * kReexamineGapNs ? last_examined_.erase(it) : std::next(it);
  }

  bool lost_more = false;
  if (now - last_stats_ns_ >= kStatsIntervalNs) {
    last_stats_ns_ = now;
    const uint64_t lost = skel_->ReadStats()[SP_PROC_STAT_LOST];
    lost_more = lost != last_lost_;
    last_lost_ = lost;
  }
  bool rescan_due = options_.rescan_interval_s > 0 &&
                    now - last_rescan_ns_ >= SecondsToNs(options_.rescan_interval_s);
  // After a loss every process is looked at again: a library load of a watched one may be
  // among the lost events.
  if (lost_more || rescan_due) Rescan(/*every=*/lost_more);
  if (now - last_liveness_ns_ >= SecondsToNs(options_.liveness_interval_s)) CheckLiveness();
  return (woken > 0 ? woken : 0) + rest;
}

int ProcessDiscovery::epoll_fd() const { return ring_buffer__epoll_fd(ring_.get()); }

void ProcessDiscovery::Schedule(int pid) {
  // A process loading hundreds of libraries (Python importing torch) is examined at most once
  // per kReexamineGapNs, and always once after its last load.
  uint64_t due = KernelMonotonicNs();
  auto last = last_examined_.find(pid);
  if (last != last_examined_.end()) due = std::max(due, last->second + kReexamineGapNs);
  auto [it, fresh] = pending_.emplace(pid, due);
  if (!fresh) it->second = std::max(it->second, due);
}

void ProcessDiscovery::Examine(int pid) {
  if (options_.only_pid > 0 && pid != options_.only_pid) return;
  ++stats_.examined;
  auto mapped = ReadExecutableMappings(options_.proc_root, pid);
  if (!mapped.ok()) return;  // gone already, or a kernel thread
  const bool loads_reported = HookLinker(*mapped);
  // An exec after this is a newer image than the one we attach.
  const uint64_t examined_at = KernelMonotonicNs();
  auto targets = finder_.Find(pid);
  if (!targets.ok() || targets->targets.empty()) return;
  if (!listener_->OnTargets(*targets)) return;
  if (!WatchSince(pid, targets->identity.start_time, examined_at, loads_reported).ok()) return;
  // It may have exited between Find and Watch, when its exit event would not be reported.
  auto now = ReadProcessIdentity(options_.proc_root, pid);
  if (!now.ok() || now->start_time != targets->identity.start_time) {
    // Or just after Watch: then its exit event (with its status) is already in the ring, since
    // the tracepoint fires before the parent can reap it. Handle that first.
    (void)ring_buffer__consume(ring_.get());
    if (watched_.count(pid) == 0) return;
    EndGone({pid});
  }
}

Status ProcessDiscovery::Watch(int pid, uint64_t start_time) {
  return WatchSince(pid, start_time, KernelMonotonicNs(), /*loads_reported=*/false);
}

Status ProcessDiscovery::WatchSince(int pid, uint64_t start_time, uint64_t since_ns,
                                    bool loads_reported) {
  SEQPOINT_RETURN_IF_ERROR(skel_->Watch(pid));
  watched_[pid] = Watched{start_time, since_ns, loads_reported};
  return Status::Ok();
}

void ProcessDiscovery::Forget(int pid) {
  watched_.erase(pid);
  skel_->Unwatch(pid);
  skel_->TakeExit(pid);  // a record of it now is stale: nobody asks for it any more
}

void ProcessDiscovery::ReportGone(const std::vector<int>& pids) {
  (void)ring_buffer__consume(ring_.get());
  std::vector<int> watched;
  for (int pid : pids) {
    if (watched_.count(pid) > 0) watched.push_back(pid);
  }
  EndGone(watched);
}

size_t ProcessDiscovery::EndRecordedExits(uint64_t until_ns, int except) {
  auto recorded = skel_->RecordedExits();
  // By the kernel's exit time: the one order key that survives a lost event. (A last iteration
  // record only bounds an exit from below, and /proc forgets a process once it is reaped.)
  std::sort(recorded.begin(), recorded.end(),
            [](const auto& a, const auto& b) { return a.second.time_ns < b.second.time_ns; });
  size_t ended = 0;
  for (const auto& [pid, x] : recorded) {
    if (pid == except || x.time_ns > until_ns) continue;
    skel_->TakeExit(pid);
    // Not ours any more (an exec replaced it), or the exit of an earlier process of that pid
    // (the watch began after it: its pid was reused, and the new process is the one watched).
    auto w = watched_.find(pid);
    if (w == watched_.end() || x.time_ns < w->second.since_ns) continue;
    Forget(pid);
    ExitStatus how = ExitStatus::FromWaitStatus(static_cast<int>(x.exit_status));
    how.from_record = true;
    how.time_ns = x.time_ns;
    ++stats_.exits_from_record;
    ++ended;
    listener_->OnGone(pid, how);
  }
  return ended;
}

void ProcessDiscovery::EndGone(const std::vector<int>& pids) {
  const size_t recorded = EndRecordedExits(UINT64_MAX, 0);
  std::vector<int> unknown;
  for (int pid : pids) {
    if (watched_.count(pid) > 0) unknown.push_back(pid);
  }
  if (unknown.empty()) return;
  stats_.exits_unrecorded += unknown.size();
  // One process alone has no order to get wrong.
  if (unknown.size() + recorded > 1) listener_->OnExitOrderUnknown(unknown);
  for (int pid : unknown) {
    Forget(pid);
    listener_->OnGone(pid, std::nullopt);
  }
}

bool ProcessDiscovery::HookLinker(const std::vector<Mapping>& mapped) {
  bool any_linker = false, reported = false;
  for (const Mapping& m : mapped) {
    if (!IsDynamicLinker(m.path)) continue;
    any_linker = true;
    const std::string& open_path = m.open_path;
    struct stat st {};
    if (stat(open_path.c_str(), &st) != 0) continue;
    auto key = std::make_pair(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
    // Tried once per file, hooked or not.
    if (auto [it, fresh] = hooked_linkers_.try_emplace(key, false); !fresh) {
      reported |= it->second;
      continue;
    }
    Status s = skel_->AttachLinker(open_path);
    if (s.ok()) {
      ++stats_.linkers_hooked;
      hooked_linkers_[key] = true;
      reported = true;
    } else if (stats_.linker_errors.size() < 16) {
      stats_.linker_errors.push_back(s.ToString() +
                                     " (library loads are then found by the periodic rescan)");
    }
  }
  return reported || !any_linker;
}

void ProcessDiscovery::SetZeroCodeProbes(std::vector<ZeroCodeProbe> zero_code) {
  options_.zero_code = std::move(zero_code);
  finder_ = TargetFinder(options_.proc_root, options_.zero_code);
  Rescan();
}

void ProcessDiscovery::Rescan(bool every) {
  ++stats_.rescans;
  last_rescan_ns_ = KernelMonotonicNs();
  if (options_.only_pid > 0) {
    Examine(options_.only_pid);
    return;
  }
  auto pids = ListPids(options_.proc_root);
  if (!pids.ok()) return;
  for (int pid : *pids) {
    if (!every) {
      auto w = watched_.find(pid);
      if (w != watched_.end() && w->second.loads_reported) continue;
    }
    Examine(pid);
  }
}

void ProcessDiscovery::CheckLiveness() {
  last_liveness_ns_ = KernelMonotonicNs();
  std::vector<int> gone;
  for (const auto& [pid, w] : watched_) {
    auto id = ReadProcessIdentity(options_.proc_root, pid);
    if (!id.ok() || id->start_time != w.start_time) gone.push_back(pid);
  }
  stats_.stale_detached += gone.size();
  EndGone(gone);
}

DiscoveryStats ProcessDiscovery::stats() const {
  DiscoveryStats out = stats_;
  out.lost = skel_->ReadStats()[SP_PROC_STAT_LOST];
  return out;
}

}  // namespace seqpoint::probes
