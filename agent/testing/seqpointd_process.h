// Test helper: the seqpointd binary run as a child process with its paths in a temporary
// directory, /metrics on a free port and stderr in a log file; killed when the object goes, and
// then the probes it pinned (probes.pin_dir, per state dir) are removed with `seqpointd --unpin`:
// no daemon comes back to a test's temporary state, unless the test says one will (KeepPins).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent/testing/test_harness.h"

namespace seqpoint::daemon::testing {

// Whether a test that runs seqpointd with its eBPF probes can run here: they need root (CI runs
// as root) and the built daemon. Says why not on stderr.
inline bool CanRunProbes() {
  if (geteuid() != 0) {
    std::fprintf(stderr, "skipped: the eBPF probes need root (CI runs as root)\n");
    return false;
  }
  return access(SeqpointdBinary().c_str(), X_OK) == 0;
}

// The USDT-marked stand-in trainer (probes/testing/usdt_workload.cpp).
inline std::string UsdtWorkload() { return BinaryDir() + "/probes/testing/usdt_workload"; }

class Seqpointd {
 public:
  Seqpointd(const TempDir& dir, std::vector<std::string> args, const std::string& log_name)
      : log_(dir.File(log_name)),
        socket_(dir.path() + "/run/control.sock"),
        state_dir_(dir.path() + "/state") {
    args.insert(args.begin(),
                {SeqpointdBinary(), "--state-dir", dir.path() + "/state", "--runtime-dir",
                 dir.path() + "/run", "--metrics-listen", "127.0.0.1:" + std::to_string(port_)});
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log_.c_str(), "w", stderr);
      (void)f;
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Seqpointd() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (!keep_pins_) Unpin();
  }
  // A next daemon on the same state will adopt the pinned probes: leave them at destruction.
  void KeepPins() { keep_pins_ = true; }
  // Removes the probes this daemon's state left pinned (seqpointd --unpin).
  void Unpin() const {
    std::string cmd =
        "'" + SeqpointdBinary() + "' --state-dir '" + state_dir_ + "' --unpin >/dev/null";
    (void)!std::system(cmd.c_str());
  }
  bool Ready() {
    return WaitFor([&] {
      ControlRequest r;
      r.cmd = "status";
      return SendControlRequest(socket_, r).ok();
    });
  }
  void Signal(int sig) { kill(pid_, sig); }
  // Waits for exit; returns the exit status (128 + signal when killed).
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  nlohmann::json Show(const std::string& run) {
    ControlRequest r;
    r.cmd = "show";
    r.run = run;
    auto s = SendControlRequest(socket_, r);
    return s.ok() ? *s : nlohmann::json();
  }
  nlohmann::json Request(const std::string& cmd, bool all = false) {
    ControlRequest r;
    r.cmd = cmd;
    r.all = all;
    auto s = SendControlRequest(socket_, r);
    return s.ok() ? *s : nlohmann::json();
  }
  // The run of `key` once closed (from `runs --all`), or null after the deadline.
  nlohmann::json ClosedRun(const std::string& key,
                           std::chrono::seconds limit = std::chrono::seconds(120)) {
    nlohmann::json found;
    WaitFor(
        [&] {
          nlohmann::json runs = Request("runs", true);
          if (!runs.is_object()) return false;
          for (const auto& r : runs["runs"]) {
            if (r["key"] == key && r["state"] != "active") found = r;
          }
          return !found.is_null();
        },
        limit);
    return found;
  }
  std::string Metrics() { return HttpGet("127.0.0.1", port_, "/metrics").body; }
  std::string Log() const { return ReadFile(log_); }

 private:
  std::string log_;
  std::string socket_;
  std::string state_dir_;
  bool keep_pins_ = false;
  int port_ = FreePort();
  pid_t pid_ = -1;
};

}  // namespace seqpoint::daemon::testing
