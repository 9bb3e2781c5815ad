// ProcessDiscovery: finds the training processes on the node and tells when they go away.
//
//  - At Start(), a scan of <proc_root> examines every process already running.
//  - An exec tracepoint examines every new process image as it starts.
//  - A uprobe on the dynamic linker's _dl_debug_state (the r_brk hook debuggers use) examines a
//    process again after it loads libraries: Python loads libseqpoint_usdt.so, or a job loads
//    a configured BLAS, long after exec. One uprobe per distinct ld.so file (containers bring
//    their own), attached for all processes at once.
//  - An exit tracepoint reports the exit of watched processes (those the listener attached),
//    with the wait status their parent reaps (exit code, fatal signal, core dump).
//  - The kernel also keeps each watched process's exit (time and wait status) in a map a full
//    ring cannot drop: processes are ended in the order they really ended, whether their exit
//    events were read or lost (an exit event is preceded by every recorded exit before it), and
//    a process found gone whose event was lost still gets its status. Only a process with no
//    record (the map full) ends without one, and the listener is told that its place in the
//    order is not known (OnExitOrderUnknown), never given an invented one.
//  - Lost events (ring buffer full) and missing ld.so hooks are covered by a periodic rescan
//    (rescan_interval_s), and watched pids are checked for liveness and pid reuse
//    (start time) every few seconds, so a lost exit cannot leave a stale attachment. The
//    rescan skips watched processes whose library loads the ld.so hook reports (reading their
//    maps takes the trainer's mmap_lock): only a loss of events makes it look at them again.
//  - Poll costs no system call when nothing happened: the ring is read from its mapping, and
//    the kernel's loss counter (a map lookup per CPU) at most every kStatsIntervalNs.
// "Examine" = TargetFinder::Find; a process with targets is offered to the listener. Library
// loads come in bursts (a Python import of torch is hundreds of dlopens): a process is examined
// at most every 200 ms, and always once after its last load, so a burst costs a few /proc reads.
//
// Threads: one owner thread; listener callbacks run inside Start() and Poll() on it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "probes/discovery/process_watch_skeleton.h"
#include "probes/discovery/target_finder.h"
#include "probes/libbpf_util.h"

namespace seqpoint::probes {

// How a process ended, decoded from the wait status the kernel reports to its parent
// (process_watch.bpf.c reads it at the exit of the last thread).
struct ExitStatus {
  int exit_code = 0;  // exit(n) or exit_group(n) & 0xff; 0 when killed by a signal
  int signal = 0;     // the fatal signal; 0 when it exited
  bool core_dumped = false;
  // Read from the kernel's exit record, not from the exit event (lost, or still behind in the
  // ring): the process was found gone, or ended before a process whose exit was read.
  bool from_record = false;
  uint64_t time_ns = 0;  // when it ended (CLOCK_MONOTONIC); 0 when not known
  static ExitStatus FromWaitStatus(int wait_status);
  std::string Describe() const;  // "exit status 3", "killed by signal 9 (SIGKILL)", ...
};

class DiscoveryListener {
 public:
  virtual ~DiscoveryListener() = default;
  // A process carries something to attach (possibly more than last time). Return true when
  // attached: its exit will then be reported.
  virtual bool OnTargets(const ProcessTargets& targets) = 0;
  // A watched process exited or replaced its image (exec): detach it. `how` is set when the
  // exit tracepoint saw it end; empty after an exec, or when only the liveness check found it
  // gone (its exit event lost).
  virtual void OnGone(int pid, const std::optional<ExitStatus>& how) = 0;
  // A watched process loaded or unloaded libraries (after its re-examination, once per burst
  // of loads): what it maps may have changed, e.g. a profiler's library.
  virtual void OnLibrariesChanged(int pid) { (void)pid; }
  // Called just before OnGone(pid, nullopt) for each of `pids`: processes found gone whose
  // exits the kernel did not record (events lost too), ended with others (recorded ones, or
  // each other): where they belong in the order of ends is not known.
  virtual void OnExitOrderUnknown(const std::vector<int>& pids) { (void)pids; }
};

struct DiscoveryOptions {
  std::string proc_root = "/proc";
  std::vector<ZeroCodeProbe> zero_code;  // the libraries that make a process a target
  bool scan_at_start = true;
  int only_pid = 0;               // > 0: examine this process only (`seqpoint probe --pid`)
  double rescan_interval_s = 60;  // full /proc rescan; 0 disables
  double liveness_interval_s = 5;
};

struct DiscoveryStats {
  uint64_t execs = 0;
  uint64_t library_loads = 0;
  uint64_t exits = 0;
  uint64_t examined = 0;
  uint64_t lost = 0;               // BPF side: lifecycle events the ring buffer had no room for
  uint64_t rescans = 0;            // full /proc scans (start, periodic, after a loss)
  uint64_t stale_detached = 0;     // watched pids found dead or reused by the liveness check
  uint64_t exits_from_record = 0;  // exits read from the kernel's record (event lost or behind)
  uint64_t exits_unrecorded = 0;   // processes found gone with neither event nor record
  int linkers_hooked = 0;          // distinct ld.so files with a _dl_debug_state uprobe
  std::vector<std::string> linker_errors;
};

class ProcessDiscovery {
 public:
  static Result<std::unique_ptr<ProcessDiscovery>> Create(const DiscoveryOptions& options,
                                                          DiscoveryListener* listener);
  ~ProcessDiscovery();
  ProcessDiscovery(const ProcessDiscovery&) = delete;
  ProcessDiscovery& operator=(const ProcessDiscovery&) = delete;

  // Attaches the tracepoints and scans <proc_root> (scan_at_start).
  Status Start();
  // Waits up to timeout_ms for lifecycle events and handles them.
  Result<int> Poll(int timeout_ms);
  // Whether a process waits to be examined (an exec seen moments ago): the owner polls again
  // soon rather than at its slow cadence.
  bool has_pending() const { return !pending_.empty(); }
  int epoll_fd() const;

  // Examines one process now (used by the scan, and by callers that know better).
  void Examine(int pid);
  // Report this pid's exit (the listener attached it on its own).
  Status Watch(int pid, uint64_t start_time);
  // The owner found these processes gone (its own check of /proc) before their exits were
  // reported: the exit events queued are read, then every exit the kernel recorded is
  // reported in the order they ended, then the watched `pids` left (no record) as unknown.
  void ReportGone(const std::vector<int>& pids);
  // Replaces the zero-code probe set (a config reload; the listener's IterationProbes gets the
  // same set) and rescans <proc_root> at once, so running processes that map a newly configured
  // library are found now, not at the next periodic rescan.
  void SetZeroCodeProbes(std::vector<ZeroCodeProbe> zero_code);

  DiscoveryStats stats() const;

 private:
  ProcessDiscovery(DiscoveryOptions options, DiscoveryListener* listener);
  static int OnRecord(void* self, void* data, size_t size);
  // Hooks the process's dynamic linker; true when its library loads are reported (its linker
  // is hooked, or it maps none: a static binary loads no library).
  bool HookLinker(const std::vector<Mapping>& mapped);
  void Schedule(int pid);
  // loads_reported: see Watched (false when not examined here: the periodic rescan covers it).
  Status WatchSince(int pid, uint64_t start_time, uint64_t since_ns, bool loads_reported);
  // every: also the watched processes whose library loads are reported (after a loss).
  void Rescan(bool every = true);
  void CheckLiveness();
  // Reports (OnGone, from the record) every watched process the kernel recorded as exited at
  // or before until_ns, but `except`, in the order they ended; returns how many.
  size_t EndRecordedExits(uint64_t until_ns, int except);
  // Watched `pids` found gone: the recorded exits first (EndRecordedExits), then those without
  // a record, as unknown in the order (OnExitOrderUnknown).
  void EndGone(const std::vector<int>& pids);
  void Forget(int pid);

  DiscoveryOptions options_;
  DiscoveryListener* listener_;
  TargetFinder finder_;
  std::unique_ptr<ProcessWatchSkeleton> skel_;  // before ring_: destroyed after it
  RingBufferPtr ring_;
  std::map<std::pair<uint64_t, uint64_t>, bool> hooked_linkers_;  // (dev, ino) -> hooked
  struct Watched {
    uint64_t start_time;          // /proc/PID/stat starttime: tells pid reuse
    uint64_t since_ns;            // monotonic time the watch began (the examined image's)
    bool loads_reported = false;  // HookLinker: its library loads come as events
  };
  std::map<int, Watched> watched_;
  std::map<int, uint64_t> pending_;        // pid -> when to examine it (monotonic ns)
  std::map<int, uint64_t> last_examined_;  // pid -> when it was last examined for an event
  std::set<int> libs_changed_;             // pids with a library load since their last examination
  uint64_t last_lost_ = 0;
  uint64_t last_stats_ns_ = 0;  // when the loss counter was last read
  uint64_t last_rescan_ns_ = 0;
  uint64_t last_liveness_ns_ = 0;
  DiscoveryStats stats_;
};

}  // namespace seqpoint::probes
