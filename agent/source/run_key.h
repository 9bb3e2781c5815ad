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
#include <utility>
#include <vector>

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
//
// And every layer that launched the job, whichever one the run key names, so a torchrun job
// started inside an sbatch job keeps its Slurm job id and a job in a pod its pod: the
// scheduler's job (Slurm job and step from SLURM_JOB_ID, SLURM_STEP_ID, else the job_<id>/
// step_<id> of its cgroup path, v1 or v2; the Kubernetes namespace and pod from POD_NAMESPACE
// and POD_NAME, else the pod's service-account namespace file and HOSTNAME, read only for a
// process in a kubepods cgroup) and the launcher's run (torchrun's TORCHELASTIC_RUN_ID, as in
// the run key; MPI's PMIX_NAMESPACE or Open MPI's job id).
struct RunJobLabels {
  std::string job_name;
  std::string world_size;
  std::string slurm_job_id;
  std::string slurm_step;
  std::string k8s_namespace;
  std::string k8s_pod;
  std::string launcher_run;
  bool Any() const;  // any of them said
};
RunJobLabels JobLabelsFor(const std::string& proc_root, pid_t pid);

// The labels of the launch layers (slurm_job_id, slurm_step, k8s_namespace, k8s_pod,
// launcher_run), in that order, empty ones included: what a run's series carry beside
// launcher, job_id and step (docs/metrics.md).
std::vector<std::pair<std::string, std::string>> LaunchLayerLabels(const RunJobLabels& job);

// This node's name for the `node` label: SLURMD_NODENAME is per process, so the host name
// (gethostname), or the daemon's own SEQPOINT_NODE_NAME when set; sanitized and bounded.
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
