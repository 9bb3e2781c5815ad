// Test helper: a child process with its stdin and stdout on pipes, so a test can wait for the
// child's "ready" line, attach probes, then say "go". Kills and reaps the child on destruction.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace seqpoint::probes::testing {

class ChildProcess {
 public:
  // argv[0] is the program path. `env` entries ("K=V") are added to the environment.
  static Result<ChildProcess> Start(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env = {});
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Reads one line from the child's stdout (without '\n'); waits at most timeout_ms.
  Result<std::string> ReadLine(int timeout_ms = 30000);
  Status WriteLine(const std::string& line);
  // Waits for exit; returns the exit status (128 + signal when killed).
  Result<int> Wait(int timeout_ms = 60000);
  // Waits for exit; returns the raw wait status (WIFEXITED, WTERMSIG, WCOREDUMP decode it).
  Result<int> WaitStatus(int timeout_ms = 60000);
  void Kill();

 private:
  ChildProcess(pid_t pid, int in, int out) : pid_(pid), stdin_fd_(in), stdout_fd_(out) {}
  pid_t pid_;
  int stdin_fd_;
  int stdout_fd_;
  std::string buffer_;
  bool reaped_ = false;
};

// Build-tree path of a test program (SEQPOINT_BINARY_DIR/probes/testing/<name>).
std::string TestProgram(const std::string& name);

// A path in the build tree, e.g. BuildPath("sdk/python"), found from the test binary's location
// (<build>/probes/<test>).
std::string BuildPath(const std::string& relative);

// True when the test can load BPF programs (root); otherwise prints why, for a clean skip.
bool CanUseBpf();

}  // namespace seqpoint::probes::testing
