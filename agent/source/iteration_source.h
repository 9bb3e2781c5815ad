// The seam between seqpointd and whatever reports training iterations: the eBPF probes on a
// live node (probes), or a recorded trace replayed (trace_replay_source.h) for tests
// and demos on machines where the probes cannot attach. The daemon sees only this interface.
//
// Event order per process: OnProcessFound, then per iteration an optional OnIterationBegin
// (only while the daemon asked for begin hooks on that process: the selector decides at begin
// whether to measure) and exactly one OnIterationEnd, then OnProcessExit. The eBPF source
// announces a process found through a zero-code probe only at its first iteration (libcudnn is
// mapped by every PyTorch job, RNN or not: no run is opened for those that never iterate).
// Timestamps are CLOCK_MONOTONIC nanoseconds.
//
// Threads: a source calls its sink on the daemon's io_context thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/gpu/sync_window.h"
#include "common/status.h"

namespace seqpoint::daemon {

struct ProcessInfo {
  pid_t pid = 0;
  uint64_t start_time = 0;  // /proc/<pid>/stat field 22 (clock ticks): tells reused pids apart
  std::string comm;
  // A source that knows the run already (a replay) sets it; otherwise the daemon derives the
  // run from runs.group_by (environment variable, cgroup or pid).
  std::string run_key;
};

struct IterationBegin {
  pid_t pid = 0;
  pid_t tid = 0;
  uint64_t iter = 0;
  uint32_t seq_len = 0;
  uint32_t batch = 0;
  uint64_t tokens = 0;
  uint64_t begin_ns = 0;
};

struct IterationEnd {
  pid_t pid = 0;
  pid_t tid = 0;
  uint64_t iter = 0;
  uint32_t seq_len = 0;
  uint32_t batch = 0;
  uint64_t tokens = 0;
  uint64_t begin_ns = 0;  // 0 when the begin was not seen (attached mid-iteration)
  uint64_t end_ns = 0;
  bool begin_reported = false;  // OnIterationBegin was called for this iteration
};

// Counters the source read itself at the iteration's begin and end probes (the eBPF source's
// probe counters, probes/probe_counters.h): delivered just before that iteration's
// OnIterationEnd, for iterations of processes whose begin hooks are on. Names and units as the
// collector that would otherwise count them ("perf:task-clock", "ns").
struct IterationCounters {
  pid_t pid = 0;
  uint64_t iter = 0;
  std::vector<collectors::Sample> values;
  uint32_t flags = 0;  // enum sp_counter_flag: why a value may be short (never silent)
};

struct ProcessExit {
  pid_t pid = 0;
  bool mid_iteration = false;    // an iteration was open when the process went away
  std::optional<int> exit_code;  // when the source knows it (0 when killed by a signal)
  std::optional<int> signal;     // fatal signal (0: it exited), when the source knows it
  bool core_dumped = false;      // with a fatal signal: the kernel wrote a core dump
  bool Crashed() const {
    return mid_iteration || (signal && *signal != 0) || (exit_code && *exit_code != 0);
  }
  // "exited with status 0", "exited with status 3", "killed by signal 9 (SIGKILL)",
  // "killed by signal 11 (SIGSEGV, core dumped)", "exited" (status unknown), each followed by
  // " in the middle of an iteration" when one was open.
  std::string Describe() const;
};

class IterationSink {
 public:
  virtual ~IterationSink() = default;
  virtual void OnProcessFound(const ProcessInfo& process) = 0;
  virtual void OnIterationBegin(const IterationBegin& begin) = 0;
  virtual void OnIterationEnd(const IterationEnd& end) = 0;
  virtual void OnIterationCounters(const IterationCounters& counters) { (void)counters; }
  virtual void OnProcessExit(const ProcessExit& exit) = 0;
  // An announced process loaded or unloaded libraries (a dlopen seen by the dynamic linker's
  // hook, debounced: once per burst): what it maps may have changed, e.g. a profiler's library
  // (profiler_watch.h). Only from sources whose reports_library_loads().
  virtual void OnLibrariesChanged(pid_t pid) { (void)pid; }
  // A thread of an announced process entered a collective
  // (probes/collectives/collective_probes.h) at ts_ns (CLOCK_MONOTONIC): straggling ranks
  // (agent/fleet/straggler.h).
  virtual void OnCollectiveArrival(uint32_t pid, uint64_t ts_ns) {
    (void)pid;
    (void)ts_ns;
  }
};

// How a source watches one process, for `seqpoint status` and `seqpoint show`.
struct AttachedProcess {
  pid_t pid = 0;
  std::string comm;
  std::string probe;       // "usdt", or "zero-code <name>" (a preset or [probes.zero_code_custom])
  std::string where;       // the probes attached and the files they are in
  std::string detail;      // zero-code: what an iteration spans and what the collectors of a
                           // measured one cover; empty for USDT
  bool announced = false;  // OnProcessFound was called (zero-code: at its first iteration)
};

struct DaemonConfig;

// Where a measured iteration's perf software counters are read, and how that went.
struct ProbeCounterPathStats {
  // "in-kernel sched_switch counting" (the probes read them, probes/probe_counters.h),
  // "user-space perf collector" (the collector, from the begin wake-up), or "none" (no perf
  // software event configured, or a source without probes).
  std::string path = "none";
  std::string why;  // why not in the kernel (empty when it is): "no BTF", an attach error, ...
  // The probes' tallies (enum sp_stat), summed over CPUs since the probes were loaded.
  uint64_t windows = 0;           // hooked iterations read at both probes
  uint64_t flagged = 0;           // of them, sent with a counter left out (counter_flags)
  uint64_t implausible = 0;       // values the plausibility guard rejected
  uint64_t read_failures = 0;     // probe snapshots given up (no consistent read)
  uint64_t steal_subtracted = 0;  // windows with hypervisor steal subtracted from task-clock
  uint64_t steal_flagged = 0;     // of them, task-clock left out: too much stolen
  // Where the kernel path reads hypervisor steal: "kvm_steal_time", "run_queue", "none", or ""
  // when the path is not in the kernel (IterationProbeSkeleton::steal_source); why, in a sentence.
  std::string steal_source;
  std::string steal_why;
  uint64_t steal_stale = 0;   // windows with a CPU's steal read from its run queue's copy
  uint64_t arm_failures = 0;  // processes the kernel path could not arm (user space instead)
};

struct SourceStats {
  uint64_t events = 0;      // delivered
  uint64_t lost = 0;        // dropped before delivery (ring buffer full)
  uint64_t anomalies = 0;   // unmatched begin/end, duplicates, SL out of range
  uint64_t processes = 0;   // attached now
  std::string description;  // one line for logs and `seqpoint status`
  ProbeCounterPathStats counters;
};

class IterationSource {
 public:
  virtual ~IterationSource() = default;
  virtual std::string_view name() const = 0;
  // Starts delivering events to `sink` (posted on the daemon's io_context).
  virtual Status Start(IterationSink* sink) = 0;
  virtual void Stop() = 0;
  // Whether the daemon wants OnIterationBegin for every iteration of `pid` (true while its
  // run's selector may still choose SeqPoints) or only end records, batched (cheaper).
  virtual void SetBeginHooks(pid_t pid, bool wanted) = 0;
  virtual SourceStats stats() const = 0;
  // Collector events the source counts itself for `pid` (IterationCounters), e.g.
  // {"task-clock", "context-switches"}: the collectors leave them out for that process.
  virtual std::vector<std::string> ProbeCounterEvents(pid_t pid) const {
    (void)pid;
    return {};
  }
  // The processes attached now (empty for sources without live processes).
  virtual std::vector<AttachedProcess> Attached() const { return {}; }
  // A config reload (SIGHUP): applies what can change live (the eBPF source: the zero-code
  // probe set, for processes attached from now on). An error leaves the old settings.
  virtual Status Reconfigure(const DaemonConfig& config) {
    (void)config;
    return Status::Ok();
  }
  // False for sources whose pids are not live processes (a replay): the daemon then never
  // checks /proc for them, nor reads an energy counter against their timestamps (a replay's
  // clock is not this machine's).
  virtual bool pids_are_live() const { return true; }
  // True when the source reports every library load of its processes (OnLibrariesChanged): the
  // daemon then looks at a process's mappings when they change, not on a timer.
  virtual bool reports_library_loads() const { return false; }

  // GPU windows (collectors/gpu/sync_window.h). The latest return of `pid` from a CUDA/HIP
  // synchronisation (the eBPF source's sync probes, probes/sync/sync_probes.h), or why there is
  // none
  // (no sync probes on this node, the process maps no CUDA or HIP runtime, ...): the measured
  // window's GPU values then are flagged and left out.
  virtual Result<collectors::SyncReading> GpuSyncMark(pid_t pid) {
    (void)pid;
    return Unavailable("the " + std::string(name()) + " source has no CUDA sync probes");
  }
  // Calls `fn` once on the daemon's io_context after about `delay_ns` (the checks while a GPU
  // window waits for its sync); false when the source has no loop to call it from (a replay):
  // the waiting windows are then decided at the process's next iteration end, next measured
  // window or exit.
  virtual bool CallAfter(int64_t delay_ns, std::function<void()> fn) {
    (void)delay_ns;
    (void)fn;
    return false;
  }

  // Restarts without a blind spot (the eBPF source with probes.pin_dir): what a source delivers
  // stays in the kernel until the daemon has saved it, so a restarted daemon is given it again
  // rather than missing it. The daemon calls OnStateSaved after every successful save of the
  // runs (RunManager::Flush).
  virtual void OnStateSaved() {}
  // The daemon found `pids` gone from /proc (all at one check) before the source reported
  // their exits (exit events read late, or lost). The source reports them now through its own
  // exit path, in the order the processes really ended (the eBPF source: the kernel's exit
  // records): for each, the records it still holds of the process (end records batched in the
  // kernel, an iteration left open) first, then OnProcessExit, with the exit status when it has
  // it. A source that does not know a pid (or has no live processes) leaves it: the daemon then
  // ends the process itself.
  virtual void ProcessesGone(const std::vector<pid_t>& pids) { (void)pids; }
  // Processes whose probes a previous daemon left attached (pinned), alive or gone since: the
  // daemon keeps their runs open (RunManager::Resume), and the source reports the gone ones'
  // exits once it has delivered their records.
  virtual std::vector<ProcessInfo> CarriedOver() const { return {}; }
  // Called by the source when it holds enough unsaved records that the daemon should save
  // before the next flush interval (posted, never re-entrant).
  void set_save_request(std::function<void()> fn) { save_request_ = std::move(fn); }

 protected:
  std::function<void()> save_request_;
};

}  // namespace seqpoint::daemon
