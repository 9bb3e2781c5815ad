// The state directory belongs to one seqpointd at a time: an exclusive flock(2) on
// <state_dir>/seqpointd.lock, held for the daemon's life (the kernel drops it when the process
// dies, SIGKILL included, so a crash never leaves a stale lock). The holder writes its pid in
// the file, so a second daemon can say whom it collided with. Two daemons on one state.db
// would each resume the other's runs and interleave their writes.
//
// Threads: taken once at start; nothing to share.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace seqpoint::daemon {

class StateDirLock {
 public:
  static constexpr const char* kFileName = "seqpointd.lock";
  // Takes the lock of `dir` without waiting; Unavailable, naming the directory and the pid
  // holding it, when another process has it.
  static Result<std::unique_ptr<StateDirLock>> Acquire(const std::string& dir);
  ~StateDirLock();
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  StateDirLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace seqpoint::daemon
