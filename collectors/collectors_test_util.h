// Test helpers shared by the collectors' tests: a real child process that burns CPU and
// creates threads on command, and a scratch directory for fixture trees.
#pragma once

#include "common/testing/scratch_dir.h"

#include <sys/types.h>

#include <functional>
#include <string>

namespace seqpoint::collectors::testing {

// A forked child driven over a pipe. Each command runs to completion before the call returns,
// so what the child did is known exactly (CPU time is burned by thread CPU clock, not by
// wall time, so the amounts hold on a loaded machine).
class BusyChild {
 public:
  BusyChild();   // forks; the child waits for commands
  ~BusyChild();  // kills and reaps the child
  BusyChild(const BusyChild&) = delete;
  BusyChild& operator=(const BusyChild&) = delete;

  pid_t pid() const { return pid_; }
  bool ok() const { return pid_ > 0; }
  // The main thread burns `ms` of CPU.
  void BurnMain(int ms);
  // Creates `threads` new threads that each burn `ms` of CPU, then exit; joins them.
  void BurnInNewThreads(int threads, int ms);
  // Creates one thread that stays alive, blocked (used to test rescans).
  void StartSleeper();
  // The sleeper threads each burn `ms` of CPU.
  void BurnInSleepers(int ms);
  // Number of threads the child has now (from /proc/PID/task).
  int ThreadCount() const;

 private:
  void Command(char op, int arg1, int arg2);
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
};

// A fresh directory, removed with everything in it on destruction (common/testing).
using seqpoint::testing::ScratchDir;

// Runs `body` in a forked child inside a private mount namespace (unshare(CLONE_NEWNS)) where
// `class_dir` is bind-mounted over /sys/class and a fresh tmpfs over /dev/shm (rocm_smi_lib
// keeps its per-device mutex files there). Returns what `body` returned, or an error saying why
// the namespace could not be made (not root: the caller skips). The host's /sys is untouched.
struct NamespaceRun {
  bool ran = false;    // false: could not set up (reason in `output`)
  std::string output;  // body's result, or the reason
};
NamespaceRun RunWithFakeSysClass(const std::string& class_dir,
                                 const std::function<std::string()>& body);

// Copies a fixture tree (symlinks kept as links) to `to`.
void CopyTree(const std::string& from, const std::string& to);

// $SEQPOINT_SOURCE_DIR (set by ctest) or the source tree the tests were built from.
using seqpoint::testing::SourceDir;

}  // namespace seqpoint::collectors::testing
