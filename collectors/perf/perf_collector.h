// perf collector: perf_event_open counters on every thread of the target process.
//
// Threads of the target: Open lists /proc/PID/task (through the injectable proc root) and
// opens the events per thread. Threads created later:
// - inherit = true (default): the kernel copies our events into every thread and child
//   process a counted thread creates after open (see perf_event_group.h), so no rescan is
//   needed and none is done: a per-tid event for such a thread would count it twice. Open
//   repeats the listing until it is stable, which closes the race with threads created
//   between listing and opening.
// - inherit = false: Begin() lists /proc/PID/task again and opens the new threads (threads
//   created and gone inside one measured window are then missed: documented cost).
//
// Events: software events (task-clock, page-faults, ...) use no PMU counter and are measured
// on every visit, as one kernel group per thread. Hardware events are split by
// SplitIntoGroups with a real trial run of each candidate group (ProbePerfGroup), and the
// groups rotate over visits (SelectGroup). Every group is opened at Open and left disabled, so
// Begin/End are only ENABLE/DISABLE ioctls and one read() per thread and group.
//
// Scaling: each value is count * time_enabled / time_running per thread (perf stat's
// scaling), then summed. "perf:running_ratio" reports sum(running) / sum(enabled) of the
// hardware group: 1 means no multiplexing; < 1 means the kernel multiplexed (another perf
// user holds counters) and the values are scaled estimates. An event that was enabled but
// never ran is left out and named by warnings(), never reported as 0.
//
// Threads: driven by one thread.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/collector_config.h"
#include "collectors/counter_groups.h"
#include "collectors/file_root.h"
#include "collectors/perf/perf_event_group.h"

namespace seqpoint::collectors {

// Measures, once per process, whether counting the configured hardware events makes context
// switches trap (perf/pmu_trap_probe.h), so that the verdict exists before any training is
// watched: the probe itself briefly counts a hardware event, which on a trapping VM slows the
// CPU it runs on. A no-op without hardware events or with pmu_trap_check off. Returns a line
// for the log ("" when nothing was measured).
std::string PrepareHardwareEvents(const PerfOptions& options);

class PerfCollector : public Collector {
 public:
  PerfCollector(PerfOptions options, std::string proc_root);
  ~PerfCollector() override { Close(); }

  // Events the iteration probes count for this process (probes/probe_counters.h): left out
  // here. When none is left, Open says so (Unsupported: absent).
  void LeaveToProbes(std::vector<std::string> events) { in_probes_ = std::move(events); }

  std::string_view name() const override { return "perf"; }
  Status Open(const Target& target) override;
  Status Begin() override;
  Result<std::vector<Sample>> End() override;
  void Close() override;

  size_t group_count() const override;
  Status SelectGroup(size_t group) override;
  size_t current_group() const override { return current_group_; }
  std::string warnings() const override { return warnings_; }
  std::string Describe() const override;

  // For tests and `seqpoint status`: threads with open events, and the hardware groups.
  size_t thread_count() const { return threads_.size(); }
  const EventGroups& hardware_groups() const { return hardware_groups_; }

 private:
  struct ThreadEvents {
    pid_t tid = 0;
    std::optional<PerfEventGroup> software;
    std::vector<PerfEventGroup> hardware;  // one per hardware group
    PerfGroupCounts last_software;
    std::vector<PerfGroupCounts> last_hardware;
  };

  Status AttachNewThreads(bool until_stable);
  // Drops the hardware groups where counting them makes context switches trap.
  void LeaveOutTrappingHardware();
  Status OpenThread(pid_t tid, ThreadEvents* out);
  // Re-reads every group's counts as the baseline (after a failed Begin or read).
  void Resync();

  PerfOptions options_;
  FileRoot proc_;
  PerfOpenOptions open_options_;
  pid_t pid_ = 0;
  std::vector<PerfEventSpec> software_;
  std::vector<std::vector<PerfEventSpec>> hardware_;  // specs per hardware group
  EventGroups hardware_groups_;
  std::vector<RejectedEvent> rejected_;
  std::vector<std::string> in_probes_;
  std::vector<ThreadEvents> threads_;
  size_t current_group_ = 0;
  bool measuring_ = false;
  bool needs_resync_ = false;
  std::string warnings_;
};

}  // namespace seqpoint::collectors
