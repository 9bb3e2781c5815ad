// seqpointd's event-loop latency: how long a record the design says must be handled at once
// waited between the probe that stamped it (CLOCK_MONOTONIC, in the kernel) and the daemon's
// loop starting to handle it. That wait is the loop's whole backlog as a trainer sees it: the
// ring buffer's wake-up, the daemon thread's scheduling, and whatever the loop was busy with
// before (a flush, a scrape, a projection, a blocking attach).
//
// Two populations, because the probes deliver two ways (probes/iteration_probe.bpf.c, submit()):
//  - loop latency ("woken"): the records the probes submit with BPF_RB_FORCE_WAKEUP because the
//    daemon must act on them now: the begin of a hooked iteration (every begin record is one:
//    begins are sent only for hooked iterations) and the end of a hooked iteration. This, and
//    only this, is what `loop latency` means;
//  - batch delay ("batched"): end records of iterations nobody hooked, left in the ring buffer on
//    purpose until a wake-up is due (every 256 KiB of backlog, iteration_probes.h) or
//    probes.poll_interval_ms passes. Their age is staleness by design, never loop latency; it is
//    reported apart as the batch delay. One in kBatchedSample is timed, so the cheap path stays
//    one counter increment.
// Not timed at all: records stamped before this sink was made (a pinned ring's backlog from
// while no daemon ran: they waited for the daemon, not for its loop), and every record of a
// source whose timestamps are not this machine's clock (a replay: pids_are_live() is false).
//
// LoopLatencySink sits between the source and the runs and forwards every event unchanged.
// Threads: the daemon's io_context thread only (as every IterationSink).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "agent/metrics/metric_family.h"
#include "agent/source/iteration_source.h"

namespace seqpoint::daemon {

// Latencies in log-spaced buckets: 16 per power of two from 1 µs (a reported percentile is its
// bucket's upper edge, at most 1/16 = 6.25% above the true value); fixed memory whatever the count.
class LatencyHistogram {
 public:
  void Record(int64_t ns);
  uint64_t count() const { return count_; }
  int64_t max_ns() const { return max_ns_; }
  // The q-quantile (0 < q <= 1) as its bucket's upper edge, in ns; 0 when empty.
  int64_t Quantile(double q) const;
  nlohmann::json Json() const;  // {"count", "p50_us", "p99_us", "max_us"} (null values when empty)

 private:
  static constexpr int kPerOctave = 16;
  static constexpr int kOctaves = 38;                      // 1 µs .. ~2.7e5 s
  static constexpr int kOpen = kPerOctave * kOctaves + 1;  // past the last octave
  static int Bucket(int64_t ns);
  static int64_t UpperEdge(int bucket);
  std::array<uint64_t, kOpen + 1> buckets_{};  // [0]: under 1 µs
  uint64_t count_ = 0;
  int64_t max_ns_ = 0;
};

class LoopLatencySink : public IterationSink {
 public:
  static constexpr uint64_t kBatchedSample = 64;
  // `now` reads CLOCK_MONOTONIC (the probes' clock, not the clock seam's: the two must be the
  // same instant's reading); tests pass their own.
  LoopLatencySink(IterationSink* next, bool timestamps_are_ours,
                  std::function<int64_t()> now = nullptr);

  void OnProcessFound(const ProcessInfo& process) override { next_->OnProcessFound(process); }
  void OnIterationBegin(const IterationBegin& begin) override;
  void OnIterationEnd(const IterationEnd& end) override;
  void OnIterationCounters(const IterationCounters& counters) override {
    next_->OnIterationCounters(counters);
  }
  void OnProcessExit(const ProcessExit& exit) override { next_->OnProcessExit(exit); }
  void OnLibrariesChanged(pid_t pid) override { next_->OnLibrariesChanged(pid); }
  void OnCollectiveArrival(uint32_t pid, uint64_t ts_ns) override {
    next_->OnCollectiveArrival(pid, ts_ns);
  }

  const LatencyHistogram& woken() const { return woken_; }
  const LatencyHistogram& batched() const { return batched_; }
  uint64_t before_start() const { return before_start_; }
  // For `seqpoint status --json`: both populations, and how they are measured.
  nlohmann::json Json() const;
  // For /metrics: seqpoint_agent_loop_latency_seconds{stat} and
  // seqpoint_agent_batch_delay_seconds{stat} (p50, p99, max; NaN while none is timed, as a
  // Prometheus summary with no observations), and how many of each were timed. 8 series.
  std::vector<MetricFamily> Families() const;

 private:
  void Time(LatencyHistogram& h, uint64_t stamp_ns);
  IterationSink* next_;
  bool on_;
  std::function<int64_t()> now_;
  int64_t started_ns_;  // records stamped earlier waited for this daemon, not for its loop
  LatencyHistogram woken_;
  LatencyHistogram batched_;
  uint64_t batched_seen_ = 0;
  uint64_t clock_skew_ = 0;    // stamps after the reading (never expected): counted, not timed
  uint64_t before_start_ = 0;  // stamped before started_ns_: counted, not timed
};

}  // namespace seqpoint::daemon
