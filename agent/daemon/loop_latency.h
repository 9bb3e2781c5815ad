// seqpointd's event-loop latency: how long an iteration event waited between the probe that
// stamped it (CLOCK_MONOTONIC, in the kernel) and the loop starting to handle it. That wait is
// the loop's whole backlog as a trainer sees it: the ring buffer's wake-up, the daemon thread's
// scheduling, and whatever the loop was busy with before (a flush, a scrape, a projection).
//
// Two populations, because the probes deliver two ways (probes/iteration_probe.bpf.c):
//  - woken: records that wake the daemon at once (the begin of an iteration the selector wants,
//    and its end): the latency a measurement depends on, and what `loop latency` means;
//  - batched: end records of unmeasured iterations, left in the ring buffer on purpose until a
//    wake-up is due or probes.poll_interval_ms passes (they are cheap because they wait):
//    their age is staleness by design, reported apart. One in kBatchedSample is timed, so the
//    cheap path stays one counter increment.
// Only for sources whose timestamps are this machine's clock (pids_are_live): a replay's are not.
//
// LoopLatencySink sits between the source and the runs and forwards every event unchanged.
// Threads: the daemon's io_context thread only (as every IterationSink).
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include <nlohmann/json.hpp>

#include "agent/source/iteration_source.h"

namespace seqpoint::daemon {

// Latencies in log-spaced buckets: 16 per power of two from 1 µs (a reported percentile is its
// bucket's upper edge, at most 4.4% above the true value); fixed memory whatever the count.
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
  static constexpr int kOctaves = 38;  // 1 µs .. ~2.7e5 s
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
  // For `seqpoint status --json`: both populations, and how they are measured.
  nlohmann::json Json() const;

 private:
  void Time(LatencyHistogram& h, uint64_t stamp_ns);
  IterationSink* next_;
  bool on_;
  std::function<int64_t()> now_;
  LatencyHistogram woken_;
  LatencyHistogram batched_;
  uint64_t batched_seen_ = 0;
  uint64_t clock_skew_ = 0;  // stamps after the reading (never expected): counted, not timed
};

}  // namespace seqpoint::daemon
