// Test helper: a real data-parallel PyTorch job (bench/fleet/ddp_straggler_job.py: DDP over gloo
// on the CPU, iterations marked with seqpoint_probe) watched by a real seqpointd, for the
// slow-rank verdicts as an operator reads them while the job runs: `seqpoint show RUN` (text and
// --json) and /metrics. The job is one run of the daemon (SEQPOINT_RUN_ID; its ranks are numbered
// by the torchrun variables it sets). Freeze() stops the ranks (SIGSTOP) so that every reading
// after it describes the same judged steps. The ranks are killed, and the launcher reaped, when
// the object goes.
#pragma once

#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/testing/seqpointd_process.h"
#include "probes/testing/child_process.h"

namespace seqpoint::daemon::fleet::testing {

using daemon::testing::ReadFile;
using daemon::testing::Seqpointd;
using daemon::testing::TempDir;
using nlohmann::json;

// Whether the job can run here: root (eBPF), the built daemon and CLI, torch.distributed.
inline bool CanRunLiveDdp() {
  if (!daemon::testing::CanRunProbes()) return false;
  if (std::system("/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null") != 0) {
    MESSAGE("skipped: python3-torch (torch.distributed) is not installed");
    return false;
  }
  return true;
}

struct LiveJobSpec {
  int ranks = 2;
  int steps = 400;
  int slow_rank = -1;
  double slow_factor = 1;  // the slow rank's compute before the collective, x (spun in the hook)
  int slow_from = 0;
  std::string batching = "bucketed";  // every rank the same SL per step: every step compared
};

class LiveDdpJob {
 public:
  // Starts the job and lets it train once the daemon has attached to every rank.
  LiveDdpJob(Seqpointd& d, const TempDir& dir, const std::string& key, const LiveJobSpec& s)
      : d_(d), key_(key), socket_(dir.path() + "/run/control.sock") {
    std::vector<std::string> argv = {
        "/usr/bin/python3", daemon::testing::SourceDir() + "/bench/fleet/ddp_straggler_job.py",
        "--ranks",          std::to_string(s.ranks),
        "--steps",          std::to_string(s.steps),
        "--batching",       s.batching,
        "--trace-dir",      dir.File("traces")};
    if (s.slow_rank >= 0 && s.slow_factor > 1) {
      argv.insert(argv.end(),
                  {"--slow-rank", std::to_string(s.slow_rank), "--slow-factor",
                   std::to_string(s.slow_factor), "--slow-from", std::to_string(s.slow_from)});
    }
    auto job = probes::testing::ChildProcess::Start(
        argv, {"PYTHONPATH=" + probes::testing::BuildPath("sdk/python"), "SEQPOINT_RUN_ID=" + key});
    REQUIRE_MESSAGE(job.ok(), job.status().ToString());
    job_.emplace(std::move(*job));
    auto ready = job_->ReadLine(240000);  // ranks importing torch on 2 loaded cores
    REQUIRE_MESSAGE(ready.ok(), ready.status().ToString());
    std::istringstream words(*ready);
    std::string word;
    words >> word;
    REQUIRE(word == "ready");
    for (int pid; words >> pid;) pids_.push_back(pid);
    REQUIRE(pids_.size() == static_cast<size_t>(s.ranks));
    // Every rank found and probed before the first step.
    const bool live = daemon::testing::WaitFor([&] {
      json show = d_.Show(key_);
      if (!show.is_object() || !show.contains("ranks")) return false;
      if (show["ranks"]["ranks"].size() != pids_.size()) return false;
      for (const json& r : show["ranks"]["ranks"]) {
        if (r["status"] != "live") return false;
      }
      return true;
    });
    REQUIRE_MESSAGE(live, d_.Log());
    REQUIRE(job_->WriteLine("go").ok());
  }
  LiveDdpJob(const LiveDdpJob&) = delete;
  LiveDdpJob& operator=(const LiveDdpJob&) = delete;
  ~LiveDdpJob() {
    for (int pid : pids_) kill(pid, SIGKILL);  // the launcher's children; it reaps them
  }

  const std::vector<int>& pids() const { return pids_; }
  bool Running() const {
    for (int pid : pids_) {
      if (kill(pid, 0) != 0) return false;
      // A rank that exited but is not yet reaped is a zombie: gone for this purpose.
      const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
      const size_t paren = stat.rfind(')');
      if (paren == std::string::npos || stat.compare(paren + 2, 1, "Z") == 0) return false;
    }
    return true;
  }

  // The run's slow_ranks while it is active (null when not judged yet or the run is closed).
  json SlowRanks() {
    json show = d_.Show(key_);
    return show.is_object() && show.contains("slow_ranks") ? show["slow_ranks"] : json();
  }

  // Polls slow_ranks every 250 ms while the job runs, until `done` holds for it; returns the last
  // slow_ranks read, and calls `each` on every reading (null ones skipped).
  template <typename Done, typename Each>
  json PollUntil(Done done, Each each, std::chrono::seconds limit = std::chrono::seconds(420)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    json last;
    while (std::chrono::steady_clock::now() < end) {
      const bool running = Running();
      json s = SlowRanks();
      if (!s.is_null()) {
        each(s);
        last = s;
        if (done(s)) return s;
      }
      if (!running) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return last;
  }

  // Stops the ranks and waits until the daemon has judged every step they ran (their last
  // iterations settle 2 s after they ended; /metrics settles what is due): then show, its
  // --json and /metrics describe the same steps.
  void Freeze() {
    for (int pid : pids_) kill(pid, SIGSTOP);
    uint64_t last = UINT64_MAX;
    for (int i = 0; i < 40; ++i) {
      d_.Metrics();
      json s = SlowRanks();
      const uint64_t steps = s.is_null() ? 0 : s["steps"].get<uint64_t>();
      if (steps == last) return;
      last = steps;
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    }
    FAIL("the daemon kept judging steps after the ranks stopped");
  }

  // `seqpoint show RUN [--json]` as a user runs it.
  std::string Cli(const std::string& args, const TempDir& dir) const {
    const std::string out = dir.File("cli.out");
    const std::string cmd = daemon::testing::BinaryDir() + "/agent/cli/seqpoint show '" + key_ +
                            "' --socket '" + socket_ + "' " + args + " > '" + out + "' 2>&1";
    CHECK(std::system(cmd.c_str()) == 0);
    return ReadFile(out);
  }

 private:
  Seqpointd& d_;
  std::string key_;
  std::string socket_;
  std::optional<probes::testing::ChildProcess> job_;
  std::vector<int> pids_;
};

// The workload's own reading of how much slower `rank` was than `peer` in the `window` steps up
// to `step`: exp of the mean of log(its compute per token before the collective / the peer's),
// from the ranks' traces (bench/fleet/ddp_straggler_job.py writes each step as it ends, so it
// holds for ranks stopped mid-job). A rank named slow that was not slower by its own clock is a
// false alarm; one that was (a 2-core node shared with other work slows one rank more than the
// other) is named rightly. 0 when the traces hold no common step in the window.
inline double OwnSlowdown(const TempDir& dir, int rank, int peer, int64_t step,
                          int64_t window = 64) {
  auto per_token = [&](int r) {
    std::map<int64_t, double> out;
    std::istringstream in(ReadFile(dir.File("traces") + "/rank" + std::to_string(r) + ".csv"));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::vector<double> v;
      std::istringstream fields(line);
      for (std::string f; std::getline(fields, f, ',');) v.push_back(std::atof(f.c_str()));
      if (v.size() != 7 || v[2] <= 0 || v[6] <= v[3]) continue;  // a partly written last row
      out[static_cast<int64_t>(v[0])] = (v[6] - v[3]) / v[2];
    }
    return out;
  };
  const auto a = per_token(rank), b = per_token(peer);
  double sum = 0;
  int n = 0;
  for (int64_t s = step - window + 1; s <= step; ++s) {
    auto i = a.find(s), j = b.find(s);
    if (i == a.end() || j == b.end()) continue;
    sum += std::log(i->second / j->second);
    ++n;
  }
  return n > 0 ? std::exp(sum / n) : 0;
}

// The samples of a /metrics family for one run, keyed by their rank label ("" without one).
inline std::map<std::string, double> RunSamples(const std::string& text, const std::string& family,
                                                int64_t run) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  const std::string run_label = "run=\"" + std::to_string(run) + "\"";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(family + "{", 0) != 0 || line.find(run_label) == std::string::npos) continue;
    std::string rank;
    if (size_t at = line.find("rank=\""); at != std::string::npos) {
      rank = line.substr(at + 6, line.find('"', at + 6) - at - 6);
    }
    out[rank] = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return out;
}

}  // namespace seqpoint::daemon::fleet::testing
