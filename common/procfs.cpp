#include "common/procfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "common/file_error.h"

namespace seqpoint {

Result<ProcStat> ReadProcStat(const std::string& proc_root, const std::string& pid) {
  const std::string path = proc_root + "/" + pid + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileErrorStatus(errno, FileOp::kOpen, path);
  char buf[4096];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (n < 0) return FileErrorStatus(err, FileOp::kRead, path);
  const std::string text(buf, static_cast<size_t>(n));
  const size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 > text.size()) {
    return IoError(path + ": no ')' after the command name: not a proc(5) stat line");
  }
  std::istringstream rest(text.substr(close + 2));
  std::vector<std::string> f(23);  // f[i] is field i (1-based), fields 3..22
  for (int i = 3; i <= 22 && rest >> f[static_cast<size_t>(i)]; ++i) {
  }
  if (f[22].empty()) return IoError(path + ": fewer than 22 fields");
  ProcStat s;
  s.state = f[3].empty() ? '?' : f[3][0];
  s.ppid = static_cast<pid_t>(std::strtol(f[4].c_str(), nullptr, 10));
  s.utime = std::strtoull(f[14].c_str(), nullptr, 10);
  s.stime = std::strtoull(f[15].c_str(), nullptr, 10);
  s.start_time = std::strtoull(f[22].c_str(), nullptr, 10);
  return s;
}

std::string ProcPidDir(const std::string& proc_root, pid_t pid) {
  return proc_root + "/" + std::to_string(pid);
}

std::string ReadBoundedFile(const std::string& path, size_t limit) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[65536];
  while (out.size() < limit) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof buf, limit - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace seqpoint
