// The perf events the eBPF source counts in the iteration probes (probes/probe_counters.h), from
// the perf collector's configuration, and the probes' deltas as the samples the perf collector
// would have produced ("perf:task-clock", "ns"), so a run's metrics do not depend on where the
// counters were read.
//
// Which events: the software events of collectors.perf.events, in order, at most
// SP_MAX_COUNTERS, when the perf collector is enabled and collectors.perf.in_probe is on. Not
// with collectors.perf.exclude_kernel (the probes count kernel time too), and never hardware
// events (groups, multiplexing and the PMU trap check stay with the user-space collector).
//
// Threads: pure functions.
#pragma once

#include <string>
#include <vector>

#include "agent/source/iteration_source.h"
#include "collectors/collector_config.h"
#include "probes/iteration_probes.h"

namespace seqpoint::daemon {

std::vector<probes::ProbeCounterEvent> ProbeCounterEventsFor(const collectors::PerfOptions& perf);

// Why the configuration leaves the probes no event to count (empty when `perf` gives them some):
// "collectors.perf is off", "collectors.perf.in_probe is off", ... for `seqpoint status`.
std::string ProbeCountersConfigWhyNot(const collectors::PerfOptions& perf);

// The counters of an end record of a process armed with `events`; empty values when it has none.
IterationCounters CountersOf(const probes::IterationEvent& end,
                             const std::vector<probes::ProbeCounterEvent>& events);

}  // namespace seqpoint::daemon
