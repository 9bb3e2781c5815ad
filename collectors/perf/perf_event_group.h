// One perf kernel group on one thread: a leader fd and its members, opened disabled, enabled
// and disabled together (PERF_IOC_FLAG_GROUP), read in one read() of the leader with
// PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING. Counts and times are
// cumulative since open; the caller keeps the previous reading and takes deltas.
//
// With inherit, the kernel copies the events into every thread or process the thread creates
// afterwards (kernel/events/core.c inherit_task_group), ENABLE/DISABLE reach those copies
// (perf_event_for_each_child) and a read of the leader sums them, the live ones and the exited
// ones (perf_read_group -> __perf_read_group_add over child_list). Reading the events of a
// thread that has exited still works: its final counts stay with our fd.
//
// Threads: owned by one collector; not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <vector>

#include "collectors/perf/perf_event_names.h"
#include "common/status.h"

namespace seqpoint::collectors {

struct PerfOpenOptions {
  bool inherit = true;
  bool exclude_kernel = false;
};

struct PerfGroupCounts {
  std::vector<uint64_t> values;  // raw counts per event, in open order
  uint64_t time_enabled = 0;     // ns the group was enabled
  uint64_t time_running = 0;     // ns it was on the PMU; < enabled means multiplexed
};

class PerfEventGroup {
 public:
  // Opens `specs` as one group on thread `tid` (0: the calling thread), disabled.
  static Result<PerfEventGroup> Open(std::span<const PerfEventSpec> specs, pid_t tid,
                                     const PerfOpenOptions& options);

  PerfEventGroup(PerfEventGroup&& other) noexcept : fds_(std::move(other.fds_)) {
    other.fds_.clear();
  }
  PerfEventGroup& operator=(PerfEventGroup&& other) noexcept;
  PerfEventGroup(const PerfEventGroup&) = delete;
  PerfEventGroup& operator=(const PerfEventGroup&) = delete;
  ~PerfEventGroup();

  Status Enable();
  Status Disable();
  Status Read(PerfGroupCounts* out) const;
  size_t size() const { return fds_.size(); }

 private:
  PerfEventGroup() = default;
  void CloseAll();
  std::vector<int> fds_;  // fds_[0] is the leader
};

// Opens `specs` as one group on the calling thread, runs it for a short busy loop and says
// whether the PMU scheduled it the whole time. AMD and Intel PMUs accept groups larger than
// their counters at open (arch/x86/events/core.c validate_group only fails some) and then
// never or rarely schedule them: an open that succeeds proves nothing, a trial run does.
Status ProbePerfGroup(std::span<const PerfEventSpec> specs, const PerfOpenOptions& options);

}  // namespace seqpoint::collectors
