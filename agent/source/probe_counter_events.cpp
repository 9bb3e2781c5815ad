// See probe_counter_events.h.
#include "agent/source/probe_counter_events.h"

#include "collectors/perf/perf_event_names.h"

namespace seqpoint::daemon {

std::vector<probes::ProbeCounterEvent> ProbeCounterEventsFor(const collectors::PerfOptions& perf) {
  std::vector<probes::ProbeCounterEvent> out;
  if ((perf.enabled && !*perf.enabled) || !perf.in_probe || perf.exclude_kernel) return out;
  for (const std::string& name : perf.events) {
    Result<collectors::PerfEventSpec> spec = collectors::ParsePerfEvent(name);
    if (!spec.ok() || !spec->software) continue;  // the collector reports bad names
    bool dup = false;
    for (const auto& e : out) dup |= e.name == name;
    if (dup) continue;
    if (out.size() == SP_MAX_COUNTERS) break;  // the rest stay with the user-space collector
    out.push_back({name, spec->attr.type, spec->attr.config, spec->unit});
  }
  return out;
}

std::string ProbeCountersConfigWhyNot(const collectors::PerfOptions& perf) {
  if (perf.enabled && !*perf.enabled) return "collectors.perf is off";
  if (!perf.in_probe) return "collectors.perf.in_probe is off";
  if (perf.exclude_kernel) {
    return "collectors.perf.exclude_kernel is on (the probes count kernel time too)";
  }
  if (ProbeCounterEventsFor(perf).empty()) {
    return "collectors.perf.events has no software event the probes count";
  }
  return "";
}

IterationCounters CountersOf(const probes::IterationEvent& end,
                             const std::vector<probes::ProbeCounterEvent>& events) {
  IterationCounters c;
  c.pid = static_cast<pid_t>(end.pid);
  c.iter = end.iter;
  c.flags = end.counter_flags;
  for (size_t i = 0; i < events.size() && i < SP_MAX_COUNTERS; ++i) {
    if (end.counter_mask & (1u << i)) {
      c.values.push_back(
          {"perf:" + events[i].name, static_cast<double>(end.counters[i]), events[i].unit});
    }
  }
  return c;
}

}  // namespace seqpoint::daemon
