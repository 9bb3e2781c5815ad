// See counter_windows.h.
#include "agent/measure/counter_windows.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <tuple>
#include <utility>

#include "collectors/perf/perf_collector.h"

namespace seqpoint::daemon {

void CounterWindows::UserSpaceStart(uint64_t probe_ns, uint64_t now_ns) {
  if (probe_ns == 0 || now_ns < probe_ns) return;  // unknown begin, or another clock
  const uint64_t ns = now_ns - probe_ns;
  size_t b = ns == 0 ? 0 : static_cast<size_t>(std::bit_width(ns) - 1);
  if (b >= buckets_.size()) b = buckets_.size() - 1;
  ++buckets_[b];
  ++count_;
  sum_ns_ += ns;
  if (ns > max_ns_) max_ns_ = ns;
}

void CounterWindows::TakeProbeCounters(const IterationCounters& counters,
                                       std::vector<collectors::Sample>* values) {
  // A window whose every counter the probes left out (flags say why) is still a flagged
  // window at the probes: counted before the empty-values return.
  if (counters.values.empty() && counters.flags == 0) return;
  ++probe_windows_;
  if (counters.flags != 0) ++probe_flagged_;
  for (size_t bit = 0; bit < flagged_by_reason_.size(); ++bit) {
    if (counters.flags & (1u << bit)) ++flagged_by_reason_[bit];
  }
  for (const collectors::Sample& s : counters.values) values->push_back(s);
}

uint64_t CounterWindows::OffsetQuantileNs(double q) const {
  if (count_ == 0) return 0;
  const uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_ - 1)) + 1;
  uint64_t seen = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    if (seen >= rank) return std::min(max_ns_, (uint64_t{2} << b) - 1);
  }
  return max_ns_;
}

std::vector<MetricFamily> CounterWindows::Families() const {
  std::vector<MetricFamily> out;
  MetricFamily offset = Gauge(
      "seqpoint_collector_start_offset_seconds",
      "How long after a measured iteration's begin probe the user-space collectors began its "
      "counter window, since seqpointd started, by stat (p50, p90, p99, max: log2-bucket upper "
      "bounds). Counters read at the probes start at offset 0.");
  const std::pair<double, const char*> quantiles[] = {
      {0.5, "p50"}, {0.9, "p90"}, {0.99, "p99"}, {1.0, "max"}};
  for (const auto& [q, label] : quantiles) {
    offset.Add({{"stat", label}}, static_cast<double>(OffsetQuantileNs(q)) * 1e-9);
  }
  out.push_back(std::move(offset));
  out.push_back(Counter("seqpoint_collector_windows_total",
                        "Measured iterations by where their counter window was opened: at the "
                        "iteration probes (where=\"probe\"; where=\"probe_flagged\" counts those "
                        "with a thread that may be short, e.g. on a CPU at a probe) or by "
                        "user-space collectors from the begin wake-up (where=\"user_space\").")
                    .Add({{"where", "probe"}}, static_cast<double>(probe_windows_))
                    .Add({{"where", "probe_flagged"}}, static_cast<double>(probe_flagged_))
                    .Add({{"where", "user_space"}}, static_cast<double>(count_)));
  // The names of enum sp_counter_flag's bits (probes/iteration_probe.h), in bit order.
  static constexpr const char* kReasons[] = {
      "others_running", "uncounted_thread", "read_failed", "implausible", "exec", "stolen"};
  static_assert(std::size(kReasons) == std::tuple_size_v<decltype(flagged_by_reason_)>);
  MetricFamily reasons = Counter(
      "seqpoint_probe_flagged_windows_total",
      "Measured iterations whose counters the probes left out (where=\"probe_flagged\" of "
      "seqpoint_collector_windows_total), by why (a window may have several): others_running "
      "(a sibling on a CPU at a probe: its page faults), uncounted_thread (a thread ran in the "
      "window whose switch-in the scheduler hook did not see), read_failed (no consistent "
      "snapshot), implausible (a value the guard rejected), exec (an exec inside), stolen (too "
      "much hypervisor steal: task-clock).");
  for (size_t bit = 0; bit < flagged_by_reason_.size(); ++bit) {
    reasons.Add({{"reason", kReasons[bit]}}, static_cast<double>(flagged_by_reason_[bit]));
  }
  out.push_back(std::move(reasons));
  out.push_back(
      Counter("seqpoint_gpu_windows_total",
              "Measured windows with GPU collectors (nvml, rocm_smi, gpu_metrics), by how their "
              "GPU values were decided: kept when a CUDA/HIP sync closed the window "
              "(outcome=\"closed_at_end\": a sync returned in its last 2 ms; "
              "outcome=\"closed_at_sync\": read at the process's next sync, within 1 s), else "
              "flagged \"window not closed by a sync\" and left out (outcome=\"not_closed\": no "
              "sync within 1 s; outcome=\"no_sync_probe\": the process has no sync probe; "
              "outcome=\"cut_short\": its next measured window or its exit came first; "
              "outcome=\"no_iteration\": its iteration was gone when the sync came).")
          .Add({{"outcome", "closed_at_end"}}, static_cast<double>(gpu_.closed_at_end))
          .Add({{"outcome", "closed_at_sync"}}, static_cast<double>(gpu_.closed_at_sync))
          .Add({{"outcome", "not_closed"}}, static_cast<double>(gpu_.not_closed))
          .Add({{"outcome", "no_sync_probe"}}, static_cast<double>(gpu_.no_sync_probe))
          .Add({{"outcome", "cut_short"}}, static_cast<double>(gpu_.cut_short))
          .Add({{"outcome", "no_iteration"}}, static_cast<double>(gpu_.no_iteration)));
  out.push_back(Gauge("seqpoint_gpu_window_lag_seconds",
                      "How far after a measured window's CPU end the CUDA/HIP sync that closed "
                      "it returned (windows closed at the next sync), since seqpointd started, "
                      "by stat (mean, max): the GPU's lag behind the CPU.")
                    .Add({{"stat", "mean"}}, gpu_.closed_at_sync == 0
                                                 ? 0.0
                                                 : static_cast<double>(gpu_.lag_ns_sum) * 1e-9 /
                                                       static_cast<double>(gpu_.closed_at_sync))
                    .Add({{"stat", "max"}}, static_cast<double>(gpu_.lag_ns_max) * 1e-9));
  return out;
}

void LeaveEventsToProbes(collectors::Collector& collector, const std::vector<std::string>& events) {
  if (events.empty() || collector.name() != "perf") return;
  if (auto* perf = dynamic_cast<collectors::PerfCollector*>(&collector)) {
    perf->LeaveToProbes(events);
  }
}

}  // namespace seqpoint::daemon
