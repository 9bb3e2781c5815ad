#include "agent/source/run_key.h"

#include <sys/stat.h>

#include <fstream>
#include <iterator>
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

}  // namespace

uint64_t ProcessStartTime(const std::string& proc_root, pid_t pid) {
  std::string stat = ReadSmallFile(PidDir(proc_root, pid) + "/stat", 4096);
  // comm (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
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
    case RunGrouping::kEnv: {
      // environ is NUL-separated NAME=value; bounded read (an environment over 1 MiB is absurd).
      std::string env = ReadSmallFile(PidDir(proc_root, pid) + "/environ", 1 << 20);
      const std::string prefix = group_by.env_name + "=";
      for (size_t pos = 0; pos < env.size();) {
        size_t end = env.find('\0', pos);
        if (end == std::string::npos) end = env.size();
        if (env.compare(pos, prefix.size(), prefix) == 0 && end > pos + prefix.size()) {
          return env.substr(pos + prefix.size(), end - pos - prefix.size());
        }
        pos = end + 1;
      }
      return fallback;
    }
    case RunGrouping::kCgroup: {
      // cgroup v2: the single line "0::/path" (kernel/cgroup/cgroup.c, proc_cgroup_show).
      std::istringstream lines(ReadSmallFile(PidDir(proc_root, pid) + "/cgroup", 65536));
      std::string line;
      while (std::getline(lines, line)) {
        if (line.rfind("0::", 0) == 0 && line.size() > 3) return "cgroup:" + line.substr(3);
      }
      return fallback;
    }
  }
  return fallback;
}

}  // namespace seqpoint::daemon
