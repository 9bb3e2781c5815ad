// CPU counters of this whole process from perf_event_open SOFTWARE events: task-clock,
// page-faults, context-switches, read as running totals (the caller subtracts readings).
//
// Why one counter set per thread: events opened with inherit=1 count the threads created
// *after* opening (kernel/events/core.c, perf_event_init_task -> inherit_task_group), but not
// threads that already exist. Shared libraries start threads before main(): OpenBLAS's pthread
// build starts OPENBLAS_NUM_THREADS-1 workers from its load-time constructor
// (driver/others/memory.c, gotoblas_init -> blas_thread_init). So Open() lists
// <proc>/self/task and opens every event on every existing thread with inherit=1; threads
// created later by any of them (libtorch's pool, libgomp) are inherited. Call Open() before
// libtorch runs its first parallel region.
//
// Inherited events cannot be read with PERF_FORMAT_GROUP (perf_event_open(2), EINVAL), so each
// fd is read on its own; read() on an inherited event returns the parent's count plus those of
// its live and exited children (kernel/events/core.c, perf_event_read_value).
//
// Thread safety: Read() may be called from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace seqpoint::examples {

struct SelfCounterValues {
  uint64_t task_clock_ns = 0;
  uint64_t page_faults = 0;
  uint64_t context_switches = 0;
};

class PerfSelfCounters {
 public:
  // `proc_root` is where procfs is mounted ("/proc"); tests may point it elsewhere.
  static Result<std::unique_ptr<PerfSelfCounters>> Open(const std::string& proc_root = "/proc");
  ~PerfSelfCounters();
  PerfSelfCounters(const PerfSelfCounters&) = delete;
  PerfSelfCounters& operator=(const PerfSelfCounters&) = delete;

  Result<SelfCounterValues> Read() const;
  size_t threads_at_open() const { return fds_.size() / 3; }
  // True when the kernel refused kernel-mode counting (perf_event_paranoid >= 2 and no
  // CAP_PERFMON) and the events were opened with exclude_kernel=1.
  bool user_only() const { return user_only_; }

 private:
  PerfSelfCounters() = default;
  std::vector<int> fds_;  // per thread: task-clock, page-faults, context-switches
  bool user_only_ = false;
};

}  // namespace seqpoint::examples
