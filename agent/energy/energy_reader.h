// Reading a node energy counter without blocking the daemon (issue 22): a vendor call can take
// milliseconds (NVML's total energy on an H100 with driver 580 took 4.0 ms on average, every
// read over 1 ms), so the reads happen on the reader's own thread and the event loop only
// collects what was read (Take), never waiting for a read.
//
// Each read is bracketed by the clock: the counter's value belongs somewhere in [t0, t1], and a
// counter that the firmware refreshes every U ns holds a value up to U old, so the instant it
// stands for lies in [t0 - U, t1]. U is measured once, at open, from back-to-back reads: the
// mean time between changes of the value (an upper bound when every read saw a change, the
// reads being slower than the counter). energy_sampler.h turns these brackets into each
// iteration's uncertainty.
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
  uint64_t update_ns = 0;  // mean time between value changes (see the file comment)
  uint64_t reads = 0;      // back-to-back reads it took
  uint64_t changes = 0;    // how many of them saw a new value
  uint64_t read_ns = 0;    // their mean duration
};

class EnergyReader {
 public:
  // Calibration stops at the first of: this many changes seen, this long, this many reads.
  static constexpr uint64_t kCalibrationChanges = 5;
  static constexpr uint64_t kCalibrationNs = 1'000'000'000;
  static constexpr uint64_t kCalibrationReads = 512;

  EnergyReader(std::unique_ptr<collectors::EnergySource> source, MonotonicClock clock)
      : source_(std::move(source)), clock_(std::move(clock)) {}
  ~EnergyReader();
  EnergyReader(const EnergyReader&) = delete;
  EnergyReader& operator=(const EnergyReader&) = delete;

  // Opens the source; on the caller's thread (so a missing device is an error at once).
  Status Open();
  // Starts the reader's thread: it calibrates, then reads once per Request. Without it, the
  // caller calibrates now and every Request reads at once.
  void Start(bool own_thread);
  // Asks for one read. Returns false when one is still in flight (a slow or hung read): the
  // request is dropped, never queued.
  bool Request();
  // The reads finished since the last Take, oldest first (the calibration's last read first).
  std::vector<EnergyRead> Take();
  EnergyCalibration calibration() const;
  // The time spent in reads, summed (on the reader's thread when it has one).
  uint64_t read_ns() const;

  bool own_thread() const { return own_thread_; }
  std::string_view name() const { return name_; }
  const std::string& description() const { return description_; }

 private:
  EnergyRead ReadOnce();
  void Calibrate();  // back-to-back reads; publishes the calibration and its last read
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
