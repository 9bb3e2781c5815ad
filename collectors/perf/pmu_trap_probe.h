// Does counting a hardware event make this machine's context switches expensive?
//
// The kernel saves and restores a counted task's PMU state at every context switch
// (kernel/events/core.c: perf_event_task_sched_out/in -> x86_pmu_disable/enable, MSR writes).
// On bare metal that costs well under a microsecond. A hypervisor that traps PMU MSR accesses
// turns each of those writes into a VM exit: on our test VM a measured training iteration ran
// 1.7x slower, and the trainer stayed slower for seconds after the counters were closed. No
// kernel version or CPUID flag tells which machines do this, so it is measured: two threads
// pinned to one CPU ping-pong through pipes (two switches a round trip), with and without a
// hardware event group counting both, in interleaved batches; the medians are compared.
//
// Costs ~10-50 ms once; callers cache the verdict (it is a property of the node).
// Threads: starts and joins one helper thread; pins the calling thread to its current CPU
// for the measurement and restores its affinity.
#pragma once

#include <span>

#include "collectors/perf/perf_event_group.h"
#include "collectors/perf/perf_event_names.h"
#include "common/status.h"

namespace seqpoint::collectors {

struct ContextSwitchCost {
  double plain_ns = 0;    // one context switch, no event counting
  double counted_ns = 0;  // the same with the hardware group counting both threads
};

// Unavailable when the group cannot be opened here (no PMU): nothing to decide then.
Result<ContextSwitchCost> MeasureContextSwitchCost(std::span<const PerfEventSpec> hardware,
                                                   const PerfOpenOptions& options,
                                                   int round_trips_per_batch = 400);

// Counting is judged to trap when it makes a switch at least twice as dear and 2 µs dearer:
// both, so that neither a fast machine's small absolute noise nor a slow one's small
// relative noise trips it.
bool ContextSwitchesTrap(const ContextSwitchCost& cost);

}  // namespace seqpoint::collectors
