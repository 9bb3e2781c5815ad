// The process's CPU time on every iteration, for the projections of CPU counters
// (docs/estimators.md: a counter of CPU work goes through CPU time, not through time, whose
// waits for a CPU on a loaded node are no work). Each watched process's CPU clock
// (clock_getcpuclockid: every thread's CPU time summed, exact at the read, about 1 us a read)
// is sampled every kIntervalMs into a ring per process, with the CLOCK_MONOTONIC time of the
// read (the middle of the clock reads around it: the probes' timestamps are CLOCK_MONOTONIC,
// bpf_ktime_get_ns). An iteration's CPU time is the clock interpolated linearly at its end less
// the same at its begin, from the ring only: nothing is read on the iteration path, and an
// iteration whose end is past the last sample waits for the next one (RunManager parks it), as
// the energy of agent/energy/energy_sampler.h does.
//
// Properties:
//  - Exact sums: interpolation is a function of time, so the CPU times of contiguous iterations
//    telescope to the clock's difference over them.
//  - Resolution: within one sampling interval the CPU rate is taken as constant; an iteration
//    much shorter than the interval is right on average only (the ratio estimator uses sums).
//  - A process whose clock cannot be read (it exited) stops being sampled; an iteration after
//    its last sample, or before its first, has no CPU time (counted, never guessed).
//  - Bounded: kRingSamples per process.
//
// Threads: the event loop only. The clock and the reader are injectable for tests.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "common/clock.h"

namespace seqpoint::daemon {

// The CPU time of process `pid` (all its threads) now, in ns; nullopt when it cannot be read.
std::optional<uint64_t> ReadProcessCpuNs(pid_t pid);

struct ProcessCpuStats {
  uint64_t reads = 0;
  uint64_t failures = 0;        // reads that failed (the process exited)
  uint64_t interpolations = 0;  // iterations given a CPU time
  uint64_t uncovered = 0;       // iterations without: outside the samples, or process gone
  uint64_t implausible = 0;     // CPU time below zero between two samples: left out
};

class ProcessCpuSampler {
 public:
  static constexpr int kIntervalMs = 10;
  static constexpr size_t kRingSamples = 2048;  // 20 s at 10 ms; 32 KiB a process
  using Reader = std::function<std::optional<uint64_t>(pid_t)>;
  // The kernel's CLOCK_MONOTONIC (the probes' stamps), never a test's FakeClock by default.
  using Clock = std::function<uint64_t()>;

  explicit ProcessCpuSampler(Clock clock = KernelMonotonicNs, Reader reader = ReadProcessCpuNs)
      : clock_(std::move(clock)), reader_(std::move(reader)) {}

  // Starts sampling `pid` (a first sample now); again for a watched pid: nothing.
  void Watch(pid_t pid);
  void Forget(pid_t pid) { procs_.erase(pid); }
  bool Watching(pid_t pid) const { return procs_.count(pid) > 0; }
  size_t watched() const { return procs_.size(); }
  // Reads every watched process's clock once.
  void Sample();
  // Whether a sample at or after t_ns is in `pid`'s ring.
  bool Covers(pid_t pid, uint64_t t_ns) const;
  // Whether `pid` will get no further samples (its clock failed: it exited).
  bool Ended(pid_t pid) const;
  // The CPU time of `pid` over [begin_ns, end_ns], from the ring only; nullopt when the ring
  // does not bracket both ends. Counted in the stats.
  std::optional<double> CpuBetween(pid_t pid, uint64_t begin_ns, uint64_t end_ns);
  const ProcessCpuStats& stats() const { return stats_; }

 private:
  struct Point {
    uint64_t t_ns = 0;
    uint64_t cpu_ns = 0;
  };
  struct Proc {
    std::deque<Point> ring;
    bool ended = false;
  };
  void SampleOne(pid_t pid, Proc& p);
  static std::optional<double> At(const Proc& p, uint64_t t_ns);

  Clock clock_;
  Reader reader_;
  std::map<pid_t, Proc> procs_;
  ProcessCpuStats stats_;
};

}  // namespace seqpoint::daemon
