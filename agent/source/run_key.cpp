#include "agent/source/run_key.h"

#include "common/procfs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

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
      if (std::isxdigit(static_cast<unsigned char>(c))) uid += c;
      else if (c == '-' || c == '_') uid += '-';
      else break;
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

// The job as its launcher names it, in the order of docs/config.md (runs.group_by = "auto").
std::string AutoKey(const std::string& proc_root, pid_t pid) {
  const auto env = ReadEnviron(proc_root, pid);
  auto get = [&env](const char* name) -> std::string {
    auto it = env.find(name);
    return it == env.end() ? std::string() : Sanitize(it->second);
  };
  if (std::string id = get("TORCHELASTIC_RUN_ID"); !id.empty()) {
    // torchrun's default rendezvous id is "none": the rendezvous endpoint tells jobs apart.
    if (id == "none") id += "@" + get("MASTER_ADDR") + ":" + get("MASTER_PORT");
    return "torchrun:" + id;
  }
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
      {"torchrun:", "torchrun"}, {"slurm:", "slurm"},   {"mpi:", "mpi"},
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
  return out;
}

std::string NodeName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return {};
  return Sanitize(host);
}

}  // namespace seqpoint::daemon
