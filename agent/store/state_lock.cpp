#include "agent/store/state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace seqpoint::daemon {

Result<std::unique_ptr<StateDirLock>> StateDirLock::Acquire(const std::string& dir) {
  const std::string path = dir + "/" + kFileName;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return IoError("cannot open the state directory's lock '" + path + "': " +
                   std::strerror(errno) + " (check daemon.state_dir and its permissions)");
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    std::string holder;
    char buf[32] = {};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
      holder.assign(buf, static_cast<size_t>(n));
      holder.erase(holder.find_last_not_of(" \n") + 1);
    }
    close(fd);
    if (err != EWOULDBLOCK) {
      return IoError("cannot lock '" + path + "': " + std::strerror(err));
    }
    return Unavailable("state directory '" + dir + "' is in use by another seqpointd (pid " +
                       (holder.empty() ? std::string("unknown") : holder) + ", holding " + path +
                       "); stop it, or give this one its own --state-dir (daemon.state_dir)");
  }
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock holds all the same; only the pid shown to a second daemon is lost.
  }
  return std::unique_ptr<StateDirLock>(new StateDirLock(fd, path));
}

StateDirLock::~StateDirLock() {
  // The file stays: removing it would let a third process lock a new inode while a second
  // still waits on the old one.
  close(fd_);
}

}  // namespace seqpoint::daemon
