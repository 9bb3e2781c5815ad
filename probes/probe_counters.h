// ProbeCounters: perf counters that the iteration probes read themselves, at the begin and end
// probes of a hooked iteration (probe_counters.bpf.h), so a measured iteration's counter window
// is exactly its probe-to-probe window and no user-space wake-up is needed to start or stop it.
// The deltas arrive in the iteration's end record (IterationEvent::counters).
//
// Choice: per-task events, one set per thread (perf_event_open(tid, cpu = -1), inherit off),
// not per-CPU events. bpf_perf_event_read_value reads only events local to the running
// context: a per-CPU event counts every task on that CPU (no pid filter short of a cgroup), and
// a thread migrating between begin and end would read two different counters; an inherited
// event cannot be read from BPF at all. A per-task event is readable exactly when its task runs,
// which is the case at a uprobe in that task and at its own switch-out.
//
// Multi-threaded trainers: a probe fires in one thread and cannot read its siblings' events,
// so every counted thread banks its counts into its process at each switch-out (a tp_btf
// sched_switch program, attached only while some process is armed) and at each probe; the
// process's total at a probe is exact for every thread off CPU then. Limits, each flagged on
// the iteration (enum sp_counter_flag), never silent:
//  - a sibling on a CPU at begin or end (SP_COUNTERS_OTHERS_RUNNING): its run since its
//    switch-in is missing (at most one time slice per such thread);
//  - a thread created after Arm runs uncounted until the next Refresh() registers it
//    (SP_COUNTERS_UNCOUNTED_THREAD): the probes count such runs and Refresh() reacts to them;
//  - software events only (the caller's choice): hardware events need groups, multiplexing and
//    the PMU trap check of the user-space perf collector, which stays their path.
// Cost: the events count every iteration of an armed process (not just measured ones), and the
// sched_switch program runs on every context switch of the node (two hash lookups) while any
// process is armed: Disarm() when the run's budget is spent.
//
// Threads: one owner thread (IterationProbes'). Not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "probes/iteration_probe.h"
#include "probes/iteration_probe_skeleton.h"
#include "probes/libbpf_util.h"
#include "common/status.h"

namespace seqpoint::probes {

// One perf event to count in the probes: perf_event_attr type and config (software events).
struct ProbeCounterEvent {
  std::string name;  // e.g. "task-clock"
  uint32_t type = 0;
  uint64_t config = 0;
  std::string unit;  // "ns" or "count"
};

struct ProbeCounterProcStats {
  size_t threads = 0;           // threads with events now
  uint64_t registrations = 0;   // thread registrations (Arm and Refresh)
  uint64_t uncounted_runs = 0;  // switch-outs of threads without events (BPF side)
  uint64_t read_errors = 0;     // failed reads in the probes (BPF side)
};

class ProbeCounters {
 public:
  ProbeCounters(IterationProbeSkeleton* skel, std::string proc_root)
      : skel_(skel), proc_root_(std::move(proc_root)) {}
  ~ProbeCounters() { DisarmAll(); }
  ProbeCounters(const ProbeCounters&) = delete;
  ProbeCounters& operator=(const ProbeCounters&) = delete;

  // Opens `events` (1..SP_MAX_COUNTERS software events) on every thread of `pid` and registers
  // them with the probes. Errors name the event and the fix: Unsupported (kernel path absent or
  // event refused), PermissionDenied, NotFound (process gone), InvalidArgument. On error
  // nothing stays armed for `pid`. Arming an armed pid again with the same events is a no-op.
  Status Arm(int pid, const std::vector<ProbeCounterEvent>& events);
  void Disarm(int pid);
  void DisarmAll();
  bool Armed(int pid) const { return procs_.count(pid) > 0; }
  // The events armed for `pid`, in counter order (IterationEvent::counters[i]); null if none.
  const std::vector<ProbeCounterEvent>* EventsOf(int pid) const;

  // Registers the threads created since the last registration, in processes where the probes
  // saw such a thread run, and forgets threads that have exited. Cheap when nothing changed
  // (one map lookup per armed process): call it from every Poll.
  void Refresh();

  ProbeCounterProcStats StatsOf(int pid) const;

 private:
  struct Thread {
    uint32_t slot = 0;
    std::vector<int> fds;
  };
  struct Proc {
    std::vector<ProbeCounterEvent> events;
    std::map<pid_t, Thread> threads;
    uint64_t uncounted_seen = 0;  // uncounted_runs when threads were last registered
    uint64_t registrations = 0;
  };

  // Opens and registers every listed thread not registered yet; forgets the gone ones.
  Status RegisterThreads(int pid, Proc& proc, bool first);
  Status OpenThread(int pid, pid_t tid, Proc& proc);
  void ForgetThread(pid_t tid, Thread& thread);
  Result<uint32_t> TakeSlot();
  bool ReadProc(int pid, sp_counter_proc* out) const;

  IterationProbeSkeleton* skel_;
  std::string proc_root_;
  std::map<int, Proc> procs_;
  std::vector<uint32_t> free_slots_;
  uint32_t next_slot_ = 0;
  LinkPtr switch_link_;  // sp_sched_switch, while procs_ is not empty
};

}  // namespace seqpoint::probes
