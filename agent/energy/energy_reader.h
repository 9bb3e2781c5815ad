// Reading a node energy counter without blocking the daemon (issue 22): a vendor call can take
// milliseconds (NVML's total energy on an H100 with driver 580 took 4.0 ms on average, every
// read over 1 ms), so the reads happen on the reader's own thread and the event loop only
// collects what was read (Take), never waiting for a read.
//
// Each read is bracketed by the clock: the counter's value belongs somewhere in [t0, t1], and a
// counter that the firmware refreshes every U ns holds a value up to U old, so the instant it
// stands for lies in [t0 - U, t1]. U is measured once, at open, on the reader's thread, from
// back-to-back reads (collectors/energy/update_period.h: the mean gap between changes seen by
// on-time reads, so a preempted read does not inflate it; an upper bound when every read saw a
// change, the reads being slower than the counter, or when no read was on time), its reads
// kCalibrationSpacingNs apart. Sampling does not wait for it: a Request made meanwhile is
// answered by the measurement's next read, held back from Take until U is known (half a second
// for a 100 ms counter, up to 2 s: the iterations of that time would otherwise have no sample
// before their start). energy_sampler.h turns these brackets into each iteration's uncertainty.
//
// Two modes: own_thread (seqpointd) or the caller's thread (tests, benches: Request reads at
// once, so a test's clock and counter move in lockstep with it).
//
// Threads: Request, Take, calibration() and the destructor from one thread (the event loop);
// the source only from the reader's thread once it runs. Shared state is under mu_.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectors/energy/energy_source.h"
#include "common/status.h"

namespace seqpoint::daemon {

using MonotonicClock = std::function<uint64_t()>;
uint64_t MonotonicNowNs();  // CLOCK_MONOTONIC, the probes' clock

// One read: the value (or why there is none) and the clock just before and after it.
struct EnergyRead {
  uint64_t t0_ns = 0, t1_ns = 0;
  bool ok = false;
  double uj = 0;
  std::string error;
};

// The counter's own update period, measured at open.
struct EnergyCalibration {
  bool done = false;
  // The update period (see the file comment). Where no gap was seen between on-time reads: the
  // bound from every change seen (UpdatePeriod::changes_bound_ns, flagged upper_bound); with
  // fewer than two changes, the span the reads covered (the counter held one value that long).
  uint64_t update_ns = 0;
  uint64_t reads = 0;        // back-to-back reads it took
  uint64_t changes = 0;      // how many of them saw a new value
  uint64_t gaps = 0;         // the gaps between changes update_ns is the mean of
  bool upper_bound = false;  // the period is at most update_ns (not one gap between on-time reads)
  uint64_t read_ns = 0;      // their mean duration
};

class EnergyReader {
 public:
  // Least time between the starts of two calibration reads. Back to back, the reader is a CPU
  // hog until the measurement's end (up to its 2 s cap), and on a loaded node the scheduler
  // preempts it inside reads for hundreds of ms, the late reads that hide the period: the energy
  // e2e's 1.3 ms counter on a 2-core VM at load 3 gave reads of up to 127-451 ms and no period
  // in 3 of 4 tries (2000 reads, 0.2-1.3 s); 100 us apart, 1.3-1.5 ms in 6-10 ms every time,
  // no read over 0.04 ms. Far under the periods of the sources (1 ms and up).
  static constexpr int64_t kCalibrationSpacingNs = 100'000;

  EnergyReader(std::unique_ptr<collectors::EnergySource> source, MonotonicClock clock)
      : source_(std::move(source)), clock_(std::move(clock)) {}
  ~EnergyReader();
  EnergyReader(const EnergyReader&) = delete;
  EnergyReader& operator=(const EnergyReader&) = delete;

  // Opens the source; on the caller's thread (so a missing device is an error at once).
  Status Open();
  // Starts the reader's thread: it calibrates (its reads answering the Requests made
  // meanwhile), then reads once per Request. Without it, the caller calibrates now and every
  // Request reads at once.
  void Start(bool own_thread);
  // Asks for one read. Returns false when one is still in flight (a slow or hung read): the
  // request is dropped, never queued.
  bool Request();
  // The reads finished since the last Take, oldest first; none until the calibration is done
  // (the calibration's reads that answered Requests first, then its last read).
  std::vector<EnergyRead> Take();
  EnergyCalibration calibration() const;
  // The time spent in reads, summed (on the reader's thread when it has one).
  uint64_t read_ns() const;

  bool own_thread() const { return own_thread_; }
  std::string_view name() const { return name_; }
  const std::string& description() const { return description_; }

 private:
  EnergyRead ReadOnce();
  void Calibrate();  // back-to-back reads (MeasureUpdatePeriod); publishes it and its samples
  void Run();        // the reader's thread
  void Publish(const EnergyRead& r);

  std::unique_ptr<collectors::EnergySource> source_;
  MonotonicClock clock_;
  std::string name_, description_;  // read once: the source is the reader thread's
  std::thread thread_;
  bool own_thread_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_:
  bool stop_ = false;
  bool calibrating_ = false;
  bool requested_ = false;
  bool in_flight_ = false;
  std::vector<EnergyRead> done_;
  EnergyCalibration calibration_;
  uint64_t read_ns_ = 0;
};

}  // namespace seqpoint::daemon
