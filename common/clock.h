// The clock seam: the agent's wall-clock and monotonic readings that tests drive go through
// here, so a test installs a FakeClock and drives time (idle timeouts, day buckets, record
// timestamps) instead of sleeping. Production reads the system clocks. Not through here: I/O
// deadlines that asio timers own (control and /metrics connections, on the real steady clock),
// and readings that must match the kernel's own CLOCK_MONOTONIC or CLOCK_BOOTTIME stamps of the
// same instant (process start times, the energy sampler's counter stamps); each such reader
// says so where it reads.
#pragma once

#include <atomic>
#include <cstdint>

namespace seqpoint {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t WallNs() const = 0;       // ns since 1970-01-01 UTC
  virtual int64_t MonotonicNs() const = 0;  // ns on CLOCK_MONOTONIC (the probes' timestamps)
};

// The clock the agent reads now: the system's, unless a test installed another.
const Clock& CurrentClock();
inline int64_t WallNs() { return CurrentClock().WallNs(); }
inline int64_t MonotonicNs() { return CurrentClock().MonotonicNs(); }
// The system's CLOCK_MONOTONIC, never faked: for readings compared with the kernel's own stamps
// of the same instant (the probes' records, exec and exit times) and for deadlines of threads
// that a test's FakeClock must not stop.
uint64_t KernelMonotonicNs();  // unsigned, as the kernel's stamps

// Days since 1970-01-01 UTC of a wall time: the key of the per-bin cost history.
inline constexpr int64_t kNsPerDay = int64_t{86400} * 1'000'000'000;
inline int64_t UnixDay(int64_t wall_ns) { return wall_ns / kNsPerDay; }
inline int64_t Today() { return UnixDay(WallNs()); }

// A clock that moves only when told; installs itself for its lifetime (tests only; one at a
// time, not thread-safe against concurrent installs).
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t wall_ns = 1'700'000'000'000'000'000, int64_t mono_ns = 1'000'000'000);
  ~FakeClock() override;
  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;
  int64_t WallNs() const override { return wall_.load(); }
  int64_t MonotonicNs() const override { return mono_.load(); }
  void Advance(int64_t ns) {
    wall_ += ns;
    mono_ += ns;
  }

 private:
  std::atomic<int64_t> wall_, mono_;
  const Clock* previous_;
};

}  // namespace seqpoint
