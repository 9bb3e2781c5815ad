#include "collectors/perf/pmu_trap_probe.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

namespace seqpoint::collectors {
namespace {

pid_t CurrentTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// Two pipes between the caller and a partner thread; one round trip = two context switches
// when both threads share a CPU.
class PingPong {
 public:
  ~PingPong() {
    for (int fd : {to_partner_[0], to_partner_[1], to_caller_[0], to_caller_[1]}) {
      if (fd >= 0) close(fd);
    }
  }
  Status Start(int cpu) {
    if (pipe(to_partner_) != 0 || pipe(to_caller_) != 0) {
      return Unavailable(std::string("context-switch probe: pipe: ") + std::strerror(errno));
    }
    partner_ = std::thread([this, cpu] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      (void)sched_setaffinity(0, sizeof set, &set);
      partner_tid_ = CurrentTid();
      char c;
      while (read(to_partner_[0], &c, 1) == 1 && c != 'q') {
        if (write(to_caller_[1], &c, 1) != 1) break;
      }
    });
    while (partner_tid_.load() == 0) std::this_thread::yield();
    return Status::Ok();
  }
  void Stop() {
    if (!partner_.joinable()) return;
    char q = 'q';
    (void)!write(to_partner_[1], &q, 1);
    partner_.join();
  }
  pid_t partner_tid() const { return partner_tid_.load(); }
  // Mean nanoseconds of one context switch over `round_trips`.
  Result<double> Measure(int round_trips) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < round_trips; ++i) {
      char c = 'p';
      if (write(to_partner_[1], &c, 1) != 1 || read(to_caller_[0], &c, 1) != 1) {
        return Unavailable(std::string("context-switch probe: pipe I/O: ") + std::strerror(errno));
      }
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    return ns / (2.0 * round_trips);
  }

 private:
  int to_partner_[2] = {-1, -1};
  int to_caller_[2] = {-1, -1};
  std::thread partner_;
  std::atomic<pid_t> partner_tid_{0};
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

Result<ContextSwitchCost> MeasureContextSwitchCost(std::span<const PerfEventSpec> hardware,
                                                   const PerfOpenOptions& options,
                                                   int round_trips_per_batch) {
  if (hardware.empty()) return InvalidArgument("context-switch probe: no hardware event given");
  cpu_set_t saved;
  if (sched_getaffinity(0, sizeof saved, &saved) != 0) {
    return Unavailable(std::string("context-switch probe: sched_getaffinity: ") +
                       std::strerror(errno));
  }
  const int cpu = std::max(0, sched_getcpu());
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  (void)sched_setaffinity(0, sizeof one, &one);
  PerfOpenOptions probe_options = options;
  probe_options.inherit = false;
  Result<ContextSwitchCost> result = Internal("context-switch probe did not run");
  {
    PingPong pp;
    Status started = pp.Start(cpu);
    if (!started.ok()) {
      result = started;
    } else {
      Result<PerfEventGroup> mine = PerfEventGroup::Open(hardware, 0, probe_options);
      Result<PerfEventGroup> theirs =
          PerfEventGroup::Open(hardware, pp.partner_tid(), probe_options);
      if (!mine.ok() || !theirs.ok()) {
        result = (!mine.ok() ? mine.status() : theirs.status())
                     .WithContext("context-switch probe: opening the hardware group");
      } else {
        std::vector<double> plain, counted;
        (void)pp.Measure(round_trips_per_batch / 4);  // warm the path
        Status failed = Status::Ok();
        for (int batch = 0; batch < 5 && failed.ok(); ++batch) {
          Result<double> p = pp.Measure(round_trips_per_batch);
          if (!p.ok()) failed = p.status();
          if (failed.ok()) plain.push_back(*p);
          if (failed.ok()) failed = mine->Enable();
          if (failed.ok()) failed = theirs->Enable();
          Result<double> c =
              failed.ok() ? pp.Measure(round_trips_per_batch) : Result<double>(failed);
          (void)mine->Disable();
          (void)theirs->Disable();
          if (!c.ok()) failed = c.status();
          if (failed.ok()) counted.push_back(*c);
        }
        if (failed.ok()) {
          result = ContextSwitchCost{Median(plain), Median(counted)};
        } else {
          result = failed;
        }
      }
    }
    pp.Stop();
  }
  (void)sched_setaffinity(0, sizeof saved, &saved);
  return result;
}

bool ContextSwitchesTrap(const ContextSwitchCost& cost) {
  return cost.counted_ns >= 2 * cost.plain_ns && cost.counted_ns - cost.plain_ns >= 2000;
}

}  // namespace seqpoint::collectors
