// ProcessRegistry: the processes a run is made of, as the source announced them. A run is
// created only from an announced process (OnProcessFound), never from an iteration event: an
// event of a pid the source has not announced (a late record of a process that exited, a
// replay's stray pid) is counted and dropped. A process is known by (pid, start time): a pid
// announced again with another start time is a new process that reused the pid (the old one
// exited unseen), and the caller ends the old one first.
//
// Threads: io_context thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "agent/source/iteration_source.h"
#include "collectors/collector_set.h"

namespace seqpoint::daemon {

struct Proc {
  int64_t run_id = 0;
  uint64_t start_time = 0;  // /proc/<pid>/stat field 22 (0: not known)
  std::unique_ptr<collectors::CollectorSet> collectors;
  bool begin_hooks = false;
  std::optional<uint64_t> measuring;  // iteration the collectors are measuring
  bool rebuild = false;               // the run dropped a collector: reopen without it
  int32_t rank = -1;                  // as its launcher numbers it (-1: not known)
  uint64_t begin_probe_ns = 0;        // the begin probe of its latest hooked iteration
  std::optional<IterationCounters> probe_counters;  // of the iteration ending next
};

class ProcessRegistry {
 public:
  enum class Announce { kNew, kKnown, kReused };
  // What an announcement of (pid, start_time) is: a process not known yet, one known already
  // (announced again: exec keeps pid and start time), or a pid known with another start time
  // (kReused: end the old process, then Add the new one). A start time of 0 matches any.
  Announce Classify(pid_t pid, uint64_t start_time) const;
  Proc& Add(pid_t pid, uint64_t start_time, int64_t run_id);
  void Remove(pid_t pid) { procs_.erase(pid); }

  // The announced process `pid`, or null: then the event is counted as unannounced.
  Proc* ForEvent(pid_t pid);
  Proc* Find(pid_t pid);
  const Proc* Find(pid_t pid) const;

  std::map<pid_t, Proc>& all() { return procs_; }
  const std::map<pid_t, Proc>& all() const { return procs_; }
  size_t size() const { return procs_.size(); }
  bool HasRun(int64_t run_id) const;
  // Events dropped because their pid was never announced.
  uint64_t unannounced_events() const { return unannounced_; }

 private:
  std::map<pid_t, Proc> procs_;
  uint64_t unannounced_ = 0;
};

}  // namespace seqpoint::daemon
