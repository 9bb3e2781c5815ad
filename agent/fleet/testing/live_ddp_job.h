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

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/fleet/slow_rank.h"
#include "agent/fleet/testing/torch_ddp.h"
#include "agent/testing/seqpointd_process.h"
#include "probes/testing/child_process.h"

namespace seqpoint::daemon::fleet::testing {

using daemon::testing::ReadFile;
using daemon::testing::Seqpointd;
using daemon::testing::TempDir;
using fleet::RankCompute;
using fleet::SlowRankTest;
using nlohmann::json;

// Whether the job can run here: root (eBPF), the built daemon and CLI, torch.distributed.
inline bool CanRunLiveDdp() { return daemon::testing::CanRunProbes() && HasTorchDistributed(); }

// A CPU hog beside the job (a busy shell loop) when `on`, or nothing; it stops when the
// returned value goes.
inline std::optional<probes::testing::ChildProcess> StartCpuHog(bool on) {
  if (!on) return std::nullopt;
  auto h = probes::testing::ChildProcess::Start({"/bin/sh", "-c", "while :; do :; done"});
  REQUIRE(h.ok());
  return std::move(*h);
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

// The ranks' own reading of each step, from their traces (bench/fleet/ddp_straggler_job.py writes
// each step as it ends, so this holds for ranks stopped mid-job): per rank, step -> its tokens and
// its compute before the collective (the hook's arrival minus the step's begin, CLOCK_MONOTONIC).
inline std::vector<std::map<int64_t, RankCompute>> ReadTraces(const TempDir& dir, int ranks) {
  std::vector<std::map<int64_t, RankCompute>> out(ranks);
  for (int r = 0; r < ranks; ++r) {
    std::istringstream in(ReadFile(dir.File("traces") + "/rank" + std::to_string(r) + ".csv"));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::vector<double> v;
      std::istringstream fields(line);
      for (std::string f; std::getline(fields, f, ',');) v.push_back(std::atof(f.c_str()));
      if (v.size() != 7 || v[2] <= 0 || v[6] <= v[3]) continue;  // a partly written last row
      out[r][static_cast<int64_t>(v[0])] = {r, static_cast<uint64_t>(v[2]),
                                            static_cast<uint64_t>(v[6] - v[3])};
    }
  }
  return out;
}

// How much slower `rank` was than its peers (the other ranks of `ranks`) by the workload's own
// clock, in the `window` steps up to `step`: exp of the mean over those steps of log(its compute
// per token / the median of its peers'), the daemon's own statistic (slow_rank.h) read from the
// traces. A rank named slow that was not slower by its own clock is a false alarm; one that was
// (a 2-core node shared with other work slows one rank more than the others) is named rightly.
// 0 when the traces hold no step in the window with the rank and a peer.
inline double OwnSlowdown(const TempDir& dir, int rank, int ranks, int64_t step,
                          int64_t window = 64) {
  const auto all = ReadTraces(dir, ranks);
  auto log_per_token = [](const RankCompute& c) {
    return std::log(static_cast<double>(c.compute_ns) / static_cast<double>(c.tokens));
  };
  double sum = 0;
  int n = 0;
  for (int64_t s = step - window + 1; s <= step; ++s) {
    auto i = all[rank].find(s);
    if (i == all[rank].end()) continue;
    std::vector<double> peers;
    for (int r = 0; r < ranks; ++r) {
      if (r == rank) continue;
      if (auto j = all[r].find(s); j != all[r].end()) peers.push_back(log_per_token(j->second));
    }
    if (peers.empty()) continue;
    std::sort(peers.begin(), peers.end());
    const size_t m = peers.size() / 2;
    const double median = peers.size() % 2 ? peers[m] : (peers[m - 1] + peers[m]) / 2;
    sum += log_per_token(i->second) - median;
    ++n;
  }
  return n > 0 ? std::exp(sum / n) : 0;
}

// The slow-rank test (slow_rank.h, default options, as the daemon runs it) replayed on the ranks'
// own clocks, every step that all ranks' traces hold, in order: the (rank, step) of each alarm it
// raises. What the daemon should have said had it read the workload's clock: an alarm of the
// daemon's that this replay also raises (near the same step) came from the ranks' real timings,
// not from the observer (its join of iterations and collective arrivals, its step numbers).
inline std::vector<std::pair<int, int64_t>> OwnClockAlarms(const TempDir& dir, int ranks) {
  const auto all = ReadTraces(dir, ranks);
  SlowRankTest test;
  std::vector<std::pair<int, int64_t>> out;
  for (const auto& [step, first] : all[0]) {
    std::vector<RankCompute> row{first};
    for (int r = 1; r < ranks; ++r) {
      auto it = all[r].find(step);
      if (it == all[r].end()) break;
      row.push_back(it->second);
    }
    if (row.size() != static_cast<size_t>(ranks)) continue;
    for (int32_t rank : test.Step(static_cast<uint64_t>(step), row)) out.push_back({rank, step});
  }
  return out;
}

// Whether OwnClockAlarms holds an alarm of `rank` within `slack` steps of `step`.
inline bool OwnClockAlarmNear(const std::vector<std::pair<int, int64_t>>& own, int rank,
                              int64_t step, int64_t slack = 16) {
  for (const auto& [r, s] : own) {
    if (r == rank && std::llabs(s - step) <= slack) return true;
  }
  return false;
}

// Every alarm the daemon raised while slow_ranks was polled (LiveDdpJob::PollUntil's `each`): a
// rank's alarm count rising. Per alarm: its step, and the rank's compute ratio and floor as the
// daemon stated them then. Two alarms of one rank within one poll (250 ms) are one entry.
struct SeenAlarm {
  int rank = -1;
  int64_t step = -1;
  double daemon_ratio = 0;  // compute_ratio: the rank's compute vs its peers', last 64 steps
  double floor = 0;         // detectable_slowdown then (0: not known)
};

class AlarmLog {
 public:
  void Read(const json& slow) {
    for (const json& r : slow["ranks"]) {
      const int rank = r["rank"];
      const uint64_t alarms = r["alarms"];
      if (alarms > count_[rank] && r["alarm_step"].is_number()) {
        alarms_.push_back(
            {rank, r["alarm_step"].get<int64_t>(), r["compute_ratio"].get<double>(),
             r["detectable_slowdown"].is_number() ? r["detectable_slowdown"].get<double>() : 0});
      }
      count_[rank] = std::max(count_[rank], alarms);
    }
  }
  const std::vector<SeenAlarm>& alarms() const { return alarms_; }

 private:
  std::map<int, uint64_t> count_;
  std::vector<SeenAlarm> alarms_;
};

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
