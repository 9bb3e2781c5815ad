// Test helper: a training workload run as a child process, the way a launcher starts a rank:
// SEQPOINT_RUN_ID set, stdin on a pipe (workloads started with --wait block before their first
// iteration until a line arrives). Killed and reaped when the object goes.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace seqpoint::daemon::testing {

struct TrainingChildOptions {
  std::string stderr_log;     // non-empty: the child's stderr goes to this file
  bool quiet_stdout = false;  // stdout to /dev/null
  std::string preload;        // non-empty: LD_PRELOAD for the child
};

// Designated initializers would trip -Wmissing-field-initializers; these name the usual cases.
inline TrainingChildOptions StderrTo(std::string path) {
  TrainingChildOptions o;
  o.stderr_log = std::move(path);
  return o;
}
inline TrainingChildOptions QuietStdout(std::string preload = "") {
  TrainingChildOptions o;
  o.quiet_stdout = true;
  o.preload = std::move(preload);
  return o;
}

class TrainingChild {
 public:
  TrainingChild(const std::string& run_id, std::vector<std::string> argv,
                const TrainingChildOptions& options = {}) {
    int in[2];
    if (pipe(in) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      close(in[1]);
      if (!options.stderr_log.empty() && !std::freopen(options.stderr_log.c_str(), "w", stderr)) {
        _exit(126);
      }
      if (options.quiet_stdout && !std::freopen("/dev/null", "w", stdout)) _exit(126);
      setenv("SEQPOINT_RUN_ID", run_id.c_str(), 1);
      if (!options.preload.empty()) setenv("LD_PRELOAD", options.preload.c_str(), 1);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(in[0]);
    stdin_ = in[1];
  }
  TrainingChild(const TrainingChild&) = delete;
  TrainingChild& operator=(const TrainingChild&) = delete;
  ~TrainingChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stdin_ >= 0) close(stdin_);
  }

  pid_t pid() const { return pid_; }
  void SendLine(std::string_view line = "\n") { (void)!write(stdin_, line.data(), line.size()); }
  void Kill() { kill(pid_, SIGKILL); }
  // The wait status (waitpid).
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
};

}  // namespace seqpoint::daemon::testing
