// Which run a process belongs to (runs.group_by). By default ("auto") the job as its launcher
// names it, from what launchers already put in the ranks' environment and cgroup, first found:
//   torchrun/elastic  TORCHELASTIC_RUN_ID ("none", torchrun's default, + MASTER_ADDR:PORT)
//                     -> "torchrun:<id>"
//   Slurm             SLURM_JOB_ID [+ SLURM_STEP_ID]        -> "slurm:<job>[.<step>]"
//   MPI               PMIX_NAMESPACE, OMPI_MCA_orte_ess_jobid -> "mpi:<id>"; MPICH/Hydra ranks
//                     (PMI_RANK, PMI_SIZE, OMPI_COMM_WORLD_SIZE) -> "mpi:proxy-<parent pid>"
//   Kubernetes        the pod UID in the cgroup path          -> "k8s:pod-<uid>"
//   SEQPOINT_RUN_ID   its value, as given
// then the process itself. Values are sanitized (printable ASCII) and bounded (128 bytes).
// Or: a named environment variable (env:NAME), the cgroup, or each process its own run (pid).
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

// Who launched a run and its job id, read back from its key: launcher "torchrun", "slurm",
// "mpi", "kubernetes", "cgroup", "process" (no launcher found) or "env" (SEQPOINT_RUN_ID or
// runs.group_by = env:NAME). For labels on /metrics, show and the uploaded series.
struct RunAttribution {
  std::string launcher;
  std::string job;
};
RunAttribution AttributionOf(const std::string& run_key);

}  // namespace seqpoint::daemon
