#include "common/clock.h"

#include <time.h>

namespace seqpoint {
namespace {

int64_t Read(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

class SystemClock final : public Clock {
 public:
  int64_t WallNs() const override { return Read(CLOCK_REALTIME); }
  int64_t MonotonicNs() const override { return Read(CLOCK_MONOTONIC); }
};

const SystemClock kSystem;
std::atomic<const Clock*> current{&kSystem};

}  // namespace

uint64_t KernelMonotonicNs() { return static_cast<uint64_t>(Read(CLOCK_MONOTONIC)); }

const Clock& CurrentClock() { return *current.load(std::memory_order_acquire); }

FakeClock::FakeClock(int64_t wall_ns, int64_t mono_ns)
    : wall_(wall_ns), mono_(mono_ns), previous_(current.exchange(this)) {}

FakeClock::~FakeClock() { current.store(previous_); }

}  // namespace seqpoint
