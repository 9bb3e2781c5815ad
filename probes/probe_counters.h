// ProbeCounters: software counters that the iteration probes read themselves, at the begin and
// end probes of a hooked iteration (probe_counters.bpf.h), so a measured iteration's counter
// window is exactly its probe-to-probe window and no user-space wake-up is needed to start or stop
// it. The deltas arrive in the iteration's end record (IterationEvent::counters).
//
// Every thread of the process is counted, with no per-thread setup: a sched_switch program banks
// each of its threads' runs (time on a CPU, switches, migrations, faults) into the process, and a
// thread on a CPU at a probe is counted up to that instant from its switch-in time. Threads
// created at any time are counted from their first run; those that exist when a process is armed
// are seeded by a task iterator, as if they switched in then. What the probes cannot read exactly
// is left out of the record and flagged (enum sp_counter_flag), never sent as a value: the page
// faults of a sibling that is on another CPU at a probe; a window across an exec; a value the
// plausibility guard (sp_counter_plausible) rejects.
//
// Which events: the software events perf counts per task that the scheduler hook can follow:
// task-clock and cpu-clock (time on a CPU), context-switches, cpu-migrations, page-faults,
// minor-faults, major-faults. Others (alignment-faults, ...) and hardware events stay with the
// user-space perf collector. Page faults are the task's min_flt + maj_flt (what getrusage
// reports); perf's page-faults also counts faults that end in a retry, a rare difference.
//
// Cost: the sched_switch program runs on every context switch of the node (two hash lookups)
// while any process is armed: Disarm() when the run's budget is spent.
//
// Threads: one owner thread (IterationProbes'). Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "probes/iteration_probe.h"
#include "probes/iteration_probe_skeleton.h"
#include "probes/libbpf_util.h"

namespace seqpoint::probes {

// One perf event to count in the probes: perf_event_attr type and config (software events).
struct ProbeCounterEvent {
  std::string name;  // e.g. "task-clock"
  uint32_t type = 0;
  uint64_t config = 0;
  std::string unit;  // "ns" or "count"
};

struct ProbeCounterProcStats {
  uint64_t running = 0;           // threads on a CPU now (BPF side)
  uint64_t unknown_runs = 0;      // runs whose switch-in the hook did not see (BPF side)
  uint64_t untracked = 0;         // threads left out: the thread table was full (BPF side)
  uint64_t execs = 0;             // exec calls seen (BPF side)
  uint64_t snapshot_retries = 0;  // probe snapshots retried while the hook wrote (BPF side)
  uint64_t unseen_runs = 0;       // runs the tracepoint never reported switching in, banked
                                  // exactly from the scheduler's runtime (BPF side)
};

// The counter kind (enum sp_counter_kind) of a perf software event, or 0 when the probes cannot
// count it.
uint32_t ProbeCounterKind(const ProbeCounterEvent& event);

class ProbeCounters {
 public:
  explicit ProbeCounters(IterationProbeSkeleton* skel) : skel_(skel) {}
  ~ProbeCounters() { DisarmAll(); }
  ProbeCounters(const ProbeCounters&) = delete;
  ProbeCounters& operator=(const ProbeCounters&) = delete;

  // Counts `events` (1..SP_MAX_COUNTERS software events) over every thread of `pid` from now on.
  // Errors name the event and the fix: Unsupported (kernel path absent, or an event the probes do
  // not count), InvalidArgument (a hardware event, too many events), NotFound (process gone).
  // On error nothing stays armed for `pid`. Arming an armed pid again with the same events is a
  // no-op.
  Status Arm(int pid, const std::vector<ProbeCounterEvent>& events);
  void Disarm(int pid);
  void DisarmAll();
  bool Armed(int pid) const { return procs_.count(pid) > 0; }
  // The events armed for `pid`, in counter order (IterationEvent::counters[i]); null if none.
  const std::vector<ProbeCounterEvent>* EventsOf(int pid) const;

  ProbeCounterProcStats StatsOf(int pid) const;

 private:
  struct Proc {
    std::vector<ProbeCounterEvent> events;
  };

  bool ReadProc(int pid, sp_counter_proc* out) const;
  void ForgetThreads(int pid);
  void ForgetBegins(int pid);

  IterationProbeSkeleton* skel_;
  std::map<int, Proc> procs_;
  LinkPtr switch_link_;  // sp_sched_switch, while procs_ is not empty
  LinkPtr exec_link_;    // sp_cnt_exec, likewise
};

}  // namespace seqpoint::probes
