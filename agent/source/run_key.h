// Which run a process belongs to (runs.group_by): the ranks of one job share a value of an
// environment variable (e.g. SEQPOINT_RUN_ID, or a scheduler's SLURM_JOB_ID / TORCHELASTIC_RUN_ID),
// or a cgroup (one per job under systemd/Kubernetes), or each process is its own run (pid).
// Read through an injectable procfs root. A process without the variable falls back to its own
// run ("pid:<pid>:<start time>"), so nothing is silently merged.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "agent/config/config_validate.h"
#include "common/status.h"

namespace seqpoint::daemon {

// /proc/<pid>/stat field 22 (start time in clock ticks since boot); 0 when unreadable.
uint64_t ProcessStartTime(const std::string& proc_root, pid_t pid);
bool ProcessExists(const std::string& proc_root, pid_t pid);

// The run key of `pid`. Never fails: falls back to the per-process key.
std::string RunKeyFor(const RunGroupBy& group_by, const std::string& proc_root, pid_t pid,
                      uint64_t start_time);

}  // namespace seqpoint::daemon
