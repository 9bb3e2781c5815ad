#include "agent/measure/profiler_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <string_view>

#include "common/procfs.h"

namespace seqpoint::daemon {
namespace {

// Every HIP process of ROCm 6.2+ maps it (libamdhip64 links it) to let tools register: mapping
// it says nothing about a profiler being there.
constexpr std::string_view kNeverAProfiler = "librocprofiler-register";

// A maps file of a large trainer is a few hundred KiB; past 16 MiB something is wrong, and a
// partial read still sees the libraries mapped first.
constexpr size_t kMaxMapsBytes = 16 << 20;

std::string ReadBounded(const std::string& path, size_t limit) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[65536];
  while (out.size() < limit) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string PidDir(const std::string& proc_root, pid_t pid) {
  return proc_root + "/" + std::to_string(pid);
}

// The first profiler library among the files `pid` maps. A maps line is
// "start-end perms offset dev inode   /path" (proc(5)); only file mappings hold a '/'.
std::optional<ProfilerSighting> MappedProfiler(const std::string& proc_root, pid_t pid,
                                               const ProfilerPatterns& patterns) {
  const std::string maps = ReadBounded(PidDir(proc_root, pid) + "/maps", kMaxMapsBytes);
  std::set<std::string_view> seen;  // a library has several mappings: match each path once
  // PyTorch's CUDA build links CUPTI into libtorch_cuda (kineto), so every such process maps
  // it, profiled or not: CUPTI next to libtorch_cuda is no sighting (the launchers still are).
  std::optional<ProfilerSighting> cupti;
  bool torch_cuda = false;
  for (size_t pos = 0; pos < maps.size();) {
    size_t end = maps.find('\n', pos);
    if (end == std::string::npos) end = maps.size();
    const std::string_view line(maps.data() + pos, end - pos);
    pos = end + 1;
    const size_t slash = line.find('/');
    if (slash == std::string_view::npos) continue;
    const std::string_view path = line.substr(slash);
    if (!seen.insert(path).second) continue;
    const std::string base = Basename(path);
    torch_cuda = torch_cuda || base.rfind("libtorch_cuda", 0) == 0;
    if (std::string p = MatchProfilerLibrary(base, patterns); !p.empty()) {
      ProfilerSighting s{p, "maps " + std::string(path)};
      if (p != "libcupti") return s;
      if (!cupti) cupti = std::move(s);
    }
  }
  return torch_cuda ? std::nullopt : cupti;
}

std::string Comm(const std::string& proc_root, pid_t pid) {
  std::string comm = ReadBounded(PidDir(proc_root, pid) + "/comm", 64);
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\0')) comm.pop_back();
  return comm;
}

std::string ExeBasename(const std::string& proc_root, pid_t pid) {
  char target[4096];
  const ssize_t n = ::readlink((PidDir(proc_root, pid) + "/exe").c_str(), target, sizeof target);
  if (n <= 0) return {};
  std::string exe = Basename(std::string_view(target, static_cast<size_t>(n)));
  const std::string deleted = " (deleted)";
  if (exe.size() > deleted.size() && exe.ends_with(deleted))
    exe.resize(exe.size() - deleted.size());
  return exe;
}

// `pid` and its ancestors up to init: the first that runs a profiler's launcher.
std::optional<ProfilerSighting> LauncherProfiler(const std::string& proc_root, pid_t pid,
                                                 const ProfilerPatterns& patterns) {
  pid_t at = pid;
  // Profilers wrap the trainer a few levels up at most (nsys -> sh -> torchrun -> rank); the
  // bound also stops a cycle in a damaged fixture tree.
  for (int depth = 0; depth < 16 && at > 1; ++depth) {
    const std::string comm = Comm(proc_root, at);
    const std::string exe = ExeBasename(proc_root, at);
    for (const std::string& c : patterns.commands) {
      if (c.empty() || (comm != c && exe != c)) continue;
      const std::string who =
          at == pid ? "the process itself" : "ancestor pid " + std::to_string(at);
      return ProfilerSighting{c, who + " runs " + c};
    }
    auto stat = ReadProcStat(proc_root, std::to_string(at));
    if (!stat.ok() || stat->ppid == at) break;
    at = stat->ppid;
  }
  return std::nullopt;
}

}  // namespace

std::string MatchProfilerLibrary(const std::string& base, const ProfilerPatterns& patterns) {
  if (base.rfind(kNeverAProfiler, 0) == 0) return {};
  for (const std::string& p : patterns.libraries) {
    if (p.empty()) continue;
    if (base.rfind(p, 0) == 0 || base.rfind("lib" + p, 0) == 0) return p;
  }
  return {};
}

std::optional<ProfilerSighting> FindProfiler(const std::string& proc_root, pid_t pid,
                                             const ProfilerPatterns& patterns) {
  if (auto s = MappedProfiler(proc_root, pid, patterns)) return s;
  return LauncherProfiler(proc_root, pid, patterns);
}

}  // namespace seqpoint::daemon
