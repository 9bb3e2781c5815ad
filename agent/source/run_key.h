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
  std::string step;  // a Slurm job step ("slurm:<job>.<step>"); empty otherwise
};
RunAttribution AttributionOf(const std::string& run_key);

// What the launcher says of the job beyond its id, read from a rank's environment: its name
// (SEQPOINT_JOB_NAME, SLURM_JOB_NAME, PBS_JOBNAME, LSB_JOBNAME) and world size (WORLD_SIZE,
// SLURM_NTASKS, OMPI_COMM_WORLD_SIZE, PMI_SIZE; digits only). Sanitized and bounded like the
// run key (labels: docs/metrics.md, cardinality); empty when not set or unreadable.
struct RunJobLabels {
  std::string job_name;
  std::string world_size;
};
RunJobLabels JobLabelsFor(const std::string& proc_root, pid_t pid);

// This node's name for the `node` label: SLURMD_NODENAME is per process, so the host name
// (gethostname), sanitized and bounded.
std::string NodeName();

// What its launcher tells a rank: its rank, the ranks of its job on this node and in all
// (torchrun: RANK, LOCAL_WORLD_SIZE, WORLD_SIZE; Slurm: SLURM_PROCID, SLURM_STEP_TASKS_PER_NODE
// when every node runs as many, SLURM_NTASKS; Open MPI: OMPI_COMM_WORLD_RANK, _LOCAL_SIZE,
// _SIZE; MPICH/Hydra: PMI_RANK, MPI_LOCALNRANKS, PMI_SIZE), in the order of RunKeyFor. A job on
// one node (SLURM_NNODES = 1) runs all its ranks here. -1 and 0: not said.
struct LaunchRanks {
  int32_t rank = -1;
  uint32_t local_size = 0;
  uint32_t world_size = 0;
};
LaunchRanks LaunchRanksOf(const std::string& proc_root, pid_t pid);

}  // namespace seqpoint::daemon
