// Where a measured iteration's counter window starts, for the two ways counters are read:
//  - at the probes: the eBPF source reads the perf software events itself at the iteration's
//    begin and end probes (probes/probe_counters.h) and hands the deltas over just before the
//    iteration's end (IterationCounters); the window is the iteration's, offset 0;
//  - in user space: collectors (PAPI, ROCm SMI, NVML, and perf where the probes cannot count)
//    begin when the begin record has reached the daemon, the selector has chosen the iteration
//    and the collectors are open: their window starts late by that offset, measured here from
//    the probe's timestamp to the collectors' Begin and exported
//    (seqpoint_collector_start_offset_seconds), so the error it puts on a counter is known.
//
// Threads: the daemon's io_context thread (RunManager's).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/metrics/metric_family.h"
#include "agent/source/iteration_source.h"
#include "collectors/collector.h"

namespace seqpoint::daemon {

// How the measured windows' GPU values were decided (collectors/gpu/sync_window.h): kept when a
// CUDA/HIP sync closed the window, else flagged and left out, counted by reason.
struct GpuWindowCounts {
  uint64_t closed_at_end = 0;   // a sync returned in the window's tail: read at the end
  uint64_t closed_at_sync = 0;  // read at the process's next sync, within the bound
  uint64_t not_closed = 0;      // no sync within the bound: left out
  uint64_t no_sync_probe = 0;   // the process had no sync probe (why in last_flag): left out
  uint64_t cut_short = 0;       // its next window or its exit came before any sync: left out
  uint64_t no_iteration = 0;    // closed, but its iteration was gone (a run closed): left out
  int64_t lag_ns_sum = 0;       // over closed_at_sync: how far the sync came after the end
  int64_t lag_ns_max = 0;
  std::string last_flag;  // the latest "window not closed by a sync: ..." note
  uint64_t kept() const { return closed_at_end + closed_at_sync; }
  uint64_t left_out() const { return not_closed + no_sync_probe + cut_short + no_iteration; }
};

class CounterWindows {
 public:
  // User-space collectors began at `now_ns` for an iteration whose begin probe fired at
  // `probe_ns` (both CLOCK_MONOTONIC).
  void UserSpaceStart(uint64_t probe_ns, uint64_t now_ns);
  // The probe counters of a measured iteration: appended to its values.
  void TakeProbeCounters(const IterationCounters& counters,
                         std::vector<collectors::Sample>* values);

  uint64_t user_space_windows() const { return count_; }
  uint64_t probe_windows() const { return probe_windows_; }
  uint64_t probe_flagged() const { return probe_flagged_; }
  // Upper bound of the log2 bucket holding quantile q of the user-space offsets; 0 when none.
  uint64_t OffsetQuantileNs(double q) const;

  std::vector<MetricFamily> Families() const;

  GpuWindowCounts& gpu() { return gpu_; }
  const GpuWindowCounts& gpu() const { return gpu_; }

 private:
  std::array<uint64_t, 40> buckets_{};  // bucket b: offsets in [2^b, 2^(b+1)) ns
  uint64_t count_ = 0;
  uint64_t sum_ns_ = 0;
  uint64_t max_ns_ = 0;
  uint64_t probe_windows_ = 0;
  uint64_t probe_flagged_ = 0;  // windows a counted thread may be short in (sp_counter_flag)
  // Of them, by flag (bit i of enum sp_counter_flag): one window may count under several.
  std::array<uint64_t, 6> flagged_by_reason_{};
  GpuWindowCounts gpu_;
};

// The events the source counts at the probes for a process are left out of that process's
// perf collector (a no-op for other collectors and when `events` is empty).
void LeaveEventsToProbes(collectors::Collector& collector, const std::vector<std::string>& events);

}  // namespace seqpoint::daemon
