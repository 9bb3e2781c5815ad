#include "agent/source/source_metrics.h"

#include <string>

namespace seqpoint::daemon {

std::vector<MetricFamily> SourceFamilies(const IterationSource* source) {
  std::vector<MetricFamily> out;
  out.push_back(Gauge("seqpoint_probe_up", "1 when the iteration probes are loaded.")
                    .Add({}, source != nullptr ? 1 : 0));
  if (source == nullptr) return out;
  const SourceStats s = source->stats();
  const Labels l = {{"source", std::string(source->name())}};
  out.push_back(Counter("seqpoint_probe_events_total", "Iteration events delivered.")
                    .Add(l, static_cast<double>(s.events)));
  out.push_back(Counter("seqpoint_probe_lost_events_total",
                        "Iteration events dropped before delivery (ring buffer full).")
                    .Add(l, static_cast<double>(s.lost)));
  out.push_back(Counter("seqpoint_probe_anomalies_total",
                        "Unmatched begin/end, duplicate or out-of-range iteration events.")
                    .Add(l, static_cast<double>(s.anomalies)));
  // The counter path: which one is in force (`seqpoint status` says why), and what the probes
  // made of the windows they counted, so a left-out value is never silent.
  const ProbeCounterPathStats& c = s.counters;
  MetricFamily path = Gauge("seqpoint_probe_counting_path",
                            "1 for the path reading measured iterations' perf software counters: "
                            "kernel (the probes, sched_switch), user (the perf collector), none.");
  const std::string in_force = c.path == "in-kernel sched_switch counting" ? "kernel"
                               : c.path == "user-space perf collector"     ? "user"
                                                                           : "none";
  for (const char* p : {"kernel", "user", "none"}) path.Add({{"path", p}}, in_force == p ? 1 : 0);
  out.push_back(std::move(path));
  out.push_back(
      Counter("seqpoint_probe_counting_windows_total",
              "Counter windows read in the probes, by outcome: read (both probes), flagged (a "
              "counter left out), implausible (a value the guard rejected), read_failed (no "
              "consistent snapshot), steal_subtracted (hypervisor steal taken out of "
              "task-clock), steal_flagged (task-clock left out: too much stolen), steal_stale "
              "(a CPU's steal read from its run queue's copy, not KVM's record).")
          .Add({{"outcome", "read"}}, static_cast<double>(c.windows))
          .Add({{"outcome", "flagged"}}, static_cast<double>(c.flagged))
          .Add({{"outcome", "implausible"}}, static_cast<double>(c.implausible))
          .Add({{"outcome", "read_failed"}}, static_cast<double>(c.read_failures))
          .Add({{"outcome", "steal_subtracted"}}, static_cast<double>(c.steal_subtracted))
          .Add({{"outcome", "steal_flagged"}}, static_cast<double>(c.steal_flagged))
          .Add({{"outcome", "steal_stale"}}, static_cast<double>(c.steal_stale)));
  MetricFamily steal = Gauge(
      "seqpoint_probe_steal_source",
      "1 for where the in-kernel counter path reads hypervisor steal time: kvm_steal_time (KVM's "
      "per-CPU record, checked against the run queue's copy), run_queue (the run queue's copy "
      "only, up to a tick old), none (not subtracted); all 0 when the path is not in the kernel.");
  for (const char* src : {"kvm_steal_time", "run_queue", "none"}) {
    steal.Add({{"source", src}}, c.steal_source == src ? 1 : 0);
  }
  out.push_back(std::move(steal));
  return out;
}

}  // namespace seqpoint::daemon
