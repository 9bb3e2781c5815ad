#include "agent/source/run_key.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

#include "common/procfs.h"

namespace seqpoint::daemon {
namespace {

std::string ReadSmallFile(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  std::string out;
  if (!in) return out;
  out.resize(limit);
  in.read(out.data(), static_cast<std::streamsize>(limit));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

std::string PidDir(const std::string& proc_root, pid_t pid) {
  return proc_root + "/" + std::to_string(pid);
}

// environ is NUL-separated NAME=value; bounded read (an environment over 1 MiB is absurd).
std::map<std::string, std::string> ReadEnviron(const std::string& proc_root, pid_t pid) {
  std::map<std::string, std::string> out;
  const std::string env = ReadSmallFile(PidDir(proc_root, pid) + "/environ", 1 << 20);
  for (size_t pos = 0; pos < env.size();) {
    size_t end = env.find('\0', pos);
    if (end == std::string::npos) end = env.size();
    const size_t eq = env.find('=', pos);
    if (eq != std::string::npos && eq < end && eq > pos) {
      out.emplace(env.substr(pos, eq - pos), env.substr(eq + 1, end - eq - 1));
    }
    pos = end + 1;
  }
  return out;
}

// A value read from a process's environment, fit for a run key and a label: printable ASCII
// only, at most 128 bytes (labels read from the environment are sanitized and bounded).
std::string Sanitize(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (out.size() >= 128) break;
    out += (c > 0x20 && c < 0x7f && c != '"' && c != '\\') ? c : '_';
  }
  return out;
}

pid_t ParentPid(const std::string& proc_root, pid_t pid) {
  auto stat = ReadProcStat(proc_root, std::to_string(pid));
  return stat.ok() ? stat->ppid : 0;
}

// The pod UID in a Kubernetes cgroup path: ".../kubepods/burstable/pod<uid>/<container>"
// (cgroupfs driver) or "...kubepods-burstable-pod<uid with _>.slice/..." (systemd driver).
std::string PodUid(const std::string& cgroup_path) {
  if (cgroup_path.find("kubepods") == std::string::npos) return {};
  size_t at = cgroup_path.rfind("pod");
  while (at != std::string::npos) {
    std::string uid;
    for (size_t i = at + 3; i < cgroup_path.size(); ++i) {
      const char c = cgroup_path[i];
      if (std::isxdigit(static_cast<unsigned char>(c)))
        uid += c;
      else if (c == '-' || c == '_')
        uid += '-';
      else
        break;
    }
    if (uid.size() == 36) return uid;
    at = at == 0 ? std::string::npos : cgroup_path.rfind("pod", at - 1);
  }
  return {};
}

std::string CgroupPath(const std::string& proc_root, pid_t pid) {
  // cgroup v2: the single line "0::/path" (kernel/cgroup/cgroup.c, proc_cgroup_show).
  std::istringstream lines(ReadSmallFile(PidDir(proc_root, pid) + "/cgroup", 65536));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("0::", 0) == 0 && line.size() > 3) return line.substr(3);
  }
  return {};
}

// Every hierarchy's path of the process: "0::/path" on cgroup v2, "N:controllers:/path" per
// hierarchy on v1 (kernel/cgroup/cgroup.c, proc_cgroup_show).
std::vector<std::string> AllCgroupPaths(const std::string& proc_root, pid_t pid) {
  std::istringstream lines(ReadSmallFile(PidDir(proc_root, pid) + "/cgroup", 65536));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(lines, line)) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second != std::string::npos && second + 1 < line.size())
      out.push_back(line.substr(second + 1));
  }
  return out;
}

// The component after `prefix` in a cgroup path ("job_" in ".../job_4242/step_0/..."), up to
// the next '/'; empty when no component starts with it.
std::string CgroupComponent(const std::string& path, const std::string& prefix) {
  for (size_t at = path.find("/" + prefix); at != std::string::npos;
       at = path.find("/" + prefix, at + 1)) {
    const size_t begin = at + 1 + prefix.size();
    const size_t end = path.find('/', begin);
    std::string v = path.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (!v.empty()) return v;
  }
  return {};
}

// Slurm's job and step from the cgroup slurmstepd put the task in: v1 "/slurm/uid_<u>/job_<j>/
// step_<s>/task_<t>", v2 "/system.slice/slurmstepd.scope/job_<j>/step_<s>/user/task_<t>"
// (src/plugins/cgroup/v1 and v2 of Slurm). A job id is digits; a step, digits or a name
// ("batch", "extern", "interactive").
std::pair<std::string, std::string> SlurmFromCgroup(const std::string& proc_root, pid_t pid) {
  for (const std::string& path : AllCgroupPaths(proc_root, pid)) {
    if (path.find("slurm") == std::string::npos) continue;
    const std::string job = CgroupComponent(path, "job_");
    if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos) continue;
    return {Sanitize(job), Sanitize(CgroupComponent(path, "step_"))};
  }
  return {};
}

using Environ = std::map<std::string, std::string>;

std::string Get(const Environ& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : Sanitize(it->second);
}

// torchrun's run id; its default rendezvous id is "none": the rendezvous endpoint tells jobs
// apart.
std::string TorchrunRun(const Environ& env) {
  std::string id = Get(env, "TORCHELASTIC_RUN_ID");
  if (id == "none") id += "@" + Get(env, "MASTER_ADDR") + ":" + Get(env, "MASTER_PORT");
  return id;
}

// The job as its launcher names it, in the order of docs/config.md (runs.group_by = "auto").
std::string AutoKey(const std::string& proc_root, pid_t pid) {
  const auto env = ReadEnviron(proc_root, pid);
  auto get = [&env](const char* name) -> std::string {
    auto it = env.find(name);
    return it == env.end() ? std::string() : Sanitize(it->second);
  };
  if (std::string id = TorchrunRun(env); !id.empty()) return "torchrun:" + id;
  if (std::string job = get("SLURM_JOB_ID"); !job.empty()) {
    const std::string step = get("SLURM_STEP_ID");
    return "slurm:" + job + (step.empty() ? "" : "." + step);
  }
  if (std::string ns = get("PMIX_NAMESPACE"); !ns.empty()) return "mpi:" + ns;
  if (std::string job = get("OMPI_MCA_orte_ess_jobid"); !job.empty()) return "mpi:" + job;
  if (!get("OMPI_COMM_WORLD_SIZE").empty() || !get("PMI_RANK").empty() ||
      !get("PMI_SIZE").empty()) {
    // MPICH/Hydra names no job: the node's ranks share their launcher proxy as parent.
    return "mpi:proxy-" + std::to_string(ParentPid(proc_root, pid));
  }
  if (std::string uid = PodUid(CgroupPath(proc_root, pid)); !uid.empty()) return "k8s:pod-" + uid;
  if (std::string id = get("SEQPOINT_RUN_ID"); !id.empty()) return id;
  return {};
}

}  // namespace

uint64_t ProcessStartTime(const std::string& proc_root, pid_t pid) {
  auto stat = ReadProcStat(proc_root, std::to_string(pid));
  return stat.ok() ? stat->start_time : 0;
}

bool ProcessExists(const std::string& proc_root, pid_t pid) {
  struct stat st {};
  return stat(PidDir(proc_root, pid).c_str(), &st) == 0;
}

std::string RunKeyFor(const RunGroupBy& group_by, const std::string& proc_root, pid_t pid,
                      uint64_t start_time) {
  const std::string fallback = "pid:" + std::to_string(pid) + ":" + std::to_string(start_time);
  switch (group_by.kind) {
    case RunGrouping::kPid:
      return fallback;
    case RunGrouping::kAuto: {
      std::string key = AutoKey(proc_root, pid);
      return key.empty() ? fallback : key;
    }
    case RunGrouping::kEnv: {
      const auto env = ReadEnviron(proc_root, pid);
      auto it = env.find(group_by.env_name);
      return it == env.end() || it->second.empty() ? fallback : it->second;
    }
    case RunGrouping::kCgroup: {
      const std::string path = CgroupPath(proc_root, pid);
      return path.empty() ? fallback : "cgroup:" + path;
    }
  }
  return fallback;
}

namespace {

// The leading decimal digits of a launcher's count ("4", "4(x2)"); 0 when there are none or
// the number is absurd for ranks.
uint32_t LeadingCount(const std::string& v) {
  uint64_t n = 0;
  size_t i = 0;
  for (; i < v.size() && i < 8 && std::isdigit(static_cast<unsigned char>(v[i])); ++i) {
    n = n * 10 + static_cast<uint64_t>(v[i] - '0');
  }
  return i == 0 || n > (1u << 24) ? 0 : static_cast<uint32_t>(n);
}

}  // namespace

LaunchRanks LaunchRanksOf(const std::string& proc_root, pid_t pid) {
  const auto env = ReadEnviron(proc_root, pid);
  auto get = [&env](const char* name) -> std::string {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  auto rank_of = [](const std::string& v) -> int32_t {
    if (v.empty() || !std::isdigit(static_cast<unsigned char>(v[0]))) return -1;
    return static_cast<int32_t>(LeadingCount(v));
  };
  LaunchRanks out;
  if (!get("TORCHELASTIC_RUN_ID").empty() || !get("LOCAL_WORLD_SIZE").empty()) {
    out = {rank_of(get("RANK")), LeadingCount(get("LOCAL_WORLD_SIZE")),
           LeadingCount(get("WORLD_SIZE"))};
  } else if (!get("SLURM_JOB_ID").empty()) {
    out.rank = rank_of(get("SLURM_PROCID"));
    out.world_size = LeadingCount(get("SLURM_NTASKS"));
    // "4" or "4(x2)": every node of the step runs 4; "2,1": this node's share is not said.
    const std::string per_node = get("SLURM_STEP_TASKS_PER_NODE");
    if (!per_node.empty() && per_node.find(',') == std::string::npos) {
      out.local_size = LeadingCount(per_node);
    } else if (get("SLURM_NNODES") == "1" || get("SLURM_STEP_NUM_NODES") == "1") {
      out.local_size = out.world_size;
    }
  } else if (!get("OMPI_COMM_WORLD_SIZE").empty()) {
    out = {rank_of(get("OMPI_COMM_WORLD_RANK")), LeadingCount(get("OMPI_COMM_WORLD_LOCAL_SIZE")),
           LeadingCount(get("OMPI_COMM_WORLD_SIZE"))};
  } else if (!get("PMI_RANK").empty() || !get("PMI_SIZE").empty()) {
    out = {rank_of(get("PMI_RANK")), LeadingCount(get("MPI_LOCALNRANKS")),
           LeadingCount(get("PMI_SIZE"))};
  }
  return out;
}

RunAttribution AttributionOf(const std::string& key) {
  static const std::pair<const char*, const char*> kPrefixes[] = {
      {"torchrun:", "torchrun"},  {"slurm:", "slurm"},   {"mpi:", "mpi"},
      {"k8s:pod-", "kubernetes"}, {"cgroup:", "cgroup"}, {"pid:", "process"}};
  for (const auto& [prefix, launcher] : kPrefixes) {
    const std::string p(prefix);
    if (key.rfind(p, 0) != 0) continue;
    RunAttribution a{launcher, key.substr(p.size()), ""};
    if (a.launcher == "slurm") {  // "<job>.<step>" (AutoKey)
      if (const size_t dot = a.job.find('.'); dot != std::string::npos) {
        a.step = a.job.substr(dot + 1);
        a.job.resize(dot);
      }
    }
    return a;
  }
  return {"env", key, ""};
}

namespace {

// The first line of a small file, sanitized; empty when absent.
std::string FirstLine(const std::string& path) {
  std::string v = ReadSmallFile(path, 256);
  if (const size_t nl = v.find('\n'); nl != std::string::npos) v.resize(nl);
  return Sanitize(v);
}

// Every layer that launched the process (run_key.h), whichever one its run key names.
void AddLaunchLayers(const std::string& proc_root, pid_t pid, const Environ& env,
                     RunJobLabels& out) {
  // The environment first (what the job says of itself), then the cgroup: a batch script has
  // no SLURM_STEP_ID, but its cgroup says step_batch.
  const auto [cg_job, cg_step] = SlurmFromCgroup(proc_root, pid);
  out.slurm_job_id = Get(env, "SLURM_JOB_ID");
  out.slurm_step = Get(env, "SLURM_STEP_ID");
  if (out.slurm_step.empty()) out.slurm_step = Get(env, "SLURM_STEPID");
  if (out.slurm_job_id.empty()) out.slurm_job_id = cg_job;
  if (out.slurm_step.empty() && out.slurm_job_id == cg_job) out.slurm_step = cg_step;
  // Kubernetes: only for a process in a pod, so a host's own HOSTNAME is never taken for one.
  const bool in_pod = !PodUid(CgroupPath(proc_root, pid)).empty();
  out.k8s_namespace = Get(env, "POD_NAMESPACE");
  out.k8s_pod = Get(env, "POD_NAME");
  if (in_pod) {
    // The service account's namespace as the pod sees it: /var/run is often a link to /run in
    // the image, and a link is resolved against the reader's root, so /run is read first.
    const std::string root = PidDir(proc_root, pid) + "/root";
    for (const char* dir : {"/run", "/var/run"}) {
      if (!out.k8s_namespace.empty()) break;
      out.k8s_namespace = FirstLine(root + dir + "/secrets/kubernetes.io/serviceaccount/namespace");
    }
    if (out.k8s_pod.empty()) out.k8s_pod = Get(env, "HOSTNAME");  // the pod's name by default
  }
  out.launcher_run = TorchrunRun(env);
  if (out.launcher_run.empty()) out.launcher_run = Get(env, "PMIX_NAMESPACE");
  if (out.launcher_run.empty()) out.launcher_run = Get(env, "OMPI_MCA_orte_ess_jobid");
}

}  // namespace

RunJobLabels JobLabelsFor(const std::string& proc_root, pid_t pid) {
  const auto env = ReadEnviron(proc_root, pid);
  auto first = [&env](std::initializer_list<const char*> names) -> std::string {
    for (const char* n : names) {
      auto it = env.find(n);
      if (it != env.end() && !it->second.empty()) return Sanitize(it->second);
    }
    return {};
  };
  RunJobLabels out;
  out.job_name = first({"SEQPOINT_JOB_NAME", "SLURM_JOB_NAME", "PBS_JOBNAME", "LSB_JOBNAME"});
  out.world_size = first({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
  // A count, not free text: anything else (or an absurd length) is no world size at all.
  const bool digits = !out.world_size.empty() && out.world_size.size() <= 9 &&
                      out.world_size.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) out.world_size.clear();
  AddLaunchLayers(proc_root, pid, env, out);
  return out;
}

bool RunJobLabels::Any() const {
  return !job_name.empty() || !world_size.empty() || !slurm_job_id.empty() || !slurm_step.empty() ||
         !k8s_namespace.empty() || !k8s_pod.empty() || !launcher_run.empty();
}

std::vector<std::pair<std::string, std::string>> LaunchLayerLabels(const RunJobLabels& job) {
  return {{"slurm_job_id", job.slurm_job_id},
          {"slurm_step", job.slurm_step},
          {"k8s_namespace", job.k8s_namespace},
          {"k8s_pod", job.k8s_pod},
          {"launcher_run", job.launcher_run}};
}

std::string NodeName() {
  // An operator's own name for the node (several agents on one host, a host name that is not
  // the name the scheduler knows), else the host name.
  if (const char* name = std::getenv("SEQPOINT_NODE_NAME"); name != nullptr && *name != '\0') {
    return Sanitize(name);
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return {};
  return Sanitize(host);
}

}  // namespace seqpoint::daemon
