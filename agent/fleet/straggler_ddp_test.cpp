// Stragglers named on a real data-parallel job: bench/fleet/ddp_straggler_job.py runs 4 ranks of
// a PyTorch DDP model over gloo on the CPU, marked with seqpoint_probe (USDT); the iteration
// probes give each rank's iterations (SL, tokens, begin, end), the collective probes its entries
// into c10d::ProcessGroupGloo::allreduce, and StragglerJoin judges each step. Two runs: rank 2
// sleeps inside its forward pass every step (a slow rank at the same SL), then rank 1 is fed
// sequences twice as long. The agent must name the right rank with the right cause in most
// judged steps, and never call the long-sequence rank slow hardware in most of them.
//
// Tolerant of a loaded 2-core machine: 4 ranks share 2 CPUs, so which of the equal ranks arrives
// last is the scheduler's choice and some equal-rank steps straggle by chance; the test asserts
// majorities, not every step. With SEQPOINT_STRAGGLER_BENCH=<file> the "fleet straggler bench" case
// runs a sweep and writes its figures there (bench/fleet/stragglers.sh). Needs root (eBPF) and
// python3-torch; skips with the reason otherwise.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "agent/fleet/straggler.h"
#include "probes/collective_probes.h"
#include "probes/iteration_probes.h"
#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"

using namespace seqpoint::daemon::fleet;
using namespace seqpoint::probes;
using namespace seqpoint::probes::testing;

namespace {

bool CanRun() {
  if (!CanUseBpf()) return false;
  if (std::system("/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null") != 0) {
    MESSAGE("skipped: python3-torch (torch.distributed) is not installed");
    return false;
  }
  return true;
}

struct Scenario {
  int steps = 40;
  int slow_rank = -1;
  double slow_ms = 0;
  int long_rank = -1;
  double long_factor = 1;
};

struct Outcome {
  int ranks = 0;
  uint64_t steps = 0;        // judged
  uint64_t named = 0;        // straggling steps naming the expected rank with the expected cause
  uint64_t wrong_cause = 0;  // the expected rank, straggling, with the other cause
  uint64_t other_rank = 0;   // straggling steps naming another rank
  StragglerCounts counts;
  double median_lag_share = 0;  // over the steps naming the expected rank
  std::string job_log;
};

// Runs the job with the probes attached and judges its steps; the expected rank and cause
// come from the scenario.
Outcome Run(const Scenario& s, const std::string& dir) {
  Outcome out;
  const char* src = std::getenv("SEQPOINT_SOURCE_DIR");
  REQUIRE(src != nullptr);
  std::vector<std::string> argv = {
      "/usr/bin/python3", std::string(src) + "/bench/fleet/ddp_straggler_job.py",
      "--ranks",          "4",
      "--steps",          std::to_string(s.steps),
      "--trace-dir",      dir};
  if (s.slow_rank >= 0) {
    argv.insert(argv.end(), {"--slow-rank", std::to_string(s.slow_rank), "--slow-ms",
                             std::to_string(s.slow_ms)});
  }
  if (s.long_rank >= 0) {
    argv.insert(argv.end(), {"--long-rank", std::to_string(s.long_rank), "--long-factor",
                             std::to_string(s.long_factor)});
  }
  auto job = ChildProcess::Start(argv, {"PYTHONPATH=" + BuildPath("sdk/python")});
  REQUIRE(job.ok());
  auto ready = job->ReadLine(240000);  // 4 ranks importing torch on 2 loaded cores
  REQUIRE_MESSAGE(ready.ok(), ready.status().ToString());
  std::istringstream words(*ready);
  std::string word;
  words >> word;
  REQUIRE(word == "ready");
  std::vector<int> pids;
  for (int pid; words >> pid;) pids.push_back(pid);
  REQUIRE(pids.size() == 4);
  out.ranks = 4;

  CollectingSink sink;
  auto iterations = IterationProbes::Create({}, &sink);
  REQUIRE_MESSAGE(iterations.ok(), iterations.status().ToString());
  auto collectives = CollectiveProbes::Create({});
  REQUIRE_MESSAGE(collectives.ok(), collectives.status().ToString());
  StragglerJoin join;
  for (size_t r = 0; r < pids.size(); ++r) {
    auto a = (*iterations)->AttachPid(pids[r]);
    REQUIRE_MESSAGE(a.ok(), a.status().ToString());
    auto c = (*collectives)->AttachPid(pids[r]);
    REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    CHECK(*c >= 1);
    join.AddRank(static_cast<uint32_t>(pids[r]), static_cast<int32_t>(r));
  }
  REQUIRE(job->WriteLine("go").ok());
  size_t fed = 0;
  auto poll = [&] {
    REQUIRE((*iterations)->Poll(50).ok());
    auto n = (*collectives)->Poll(0, [&](const CollectiveArrival& a) {
      join.OnArrival(a.pid, a.ts_ns);
    });
    REQUIRE(n.ok());
    for (; fed < sink.ends.size(); ++fed) {
      const IterationEvent& e = sink.ends[fed];
      if (e.complete()) join.OnIteration(e.pid, e.iter, e.tokens, e.begin_ns, e.end_ns);
    }
  };
  const bool all = PollUntil(
      poll,
      [&] {
        for (int pid : pids) {
          if (sink.EndsOf(pid).size() < static_cast<size_t>(s.steps)) return false;
        }
        return true;
      },
      600000);
  CHECK_MESSAGE(all, "not every rank ended its steps");
  auto rc = job->Wait(120000);
  CHECK((rc.ok() && *rc == 0));
  poll();  // the last arrivals
  const CollectiveProbeStats st = (*collectives)->stats();
  CHECK(st.lost == 0);
  CHECK(st.received == st.hits);

  const int expected_rank = s.slow_rank >= 0 ? s.slow_rank : s.long_rank;
  const StragglerCause expected_cause =
      s.slow_rank >= 0 ? StragglerCause::kHardware : StragglerCause::kData;
  std::vector<double> shares;
  for (const StepVerdict& v : join.Settle(UINT64_MAX)) {
    ++out.steps;
    if (!v.straggles) continue;
    if (v.last_rank != expected_rank) {
      ++out.other_rank;
    } else if (v.cause == expected_cause) {
      ++out.named;
      shares.push_back(v.lag_share);
    } else {
      ++out.wrong_cause;
    }
  }
  std::sort(shares.begin(), shares.end());
  if (!shares.empty()) out.median_lag_share = shares[shares.size() / 2];
  out.counts = join.counts();
  return out;
}

std::string Describe(const Outcome& o) {
  return std::to_string(o.steps) + " steps judged: expected rank and cause in " +
         std::to_string(o.named) + ", expected rank with the other cause in " +
         std::to_string(o.wrong_cause) + ", another rank straggling in " +
         std::to_string(o.other_rank) + "; unmatched rank-iterations " +
         std::to_string(o.counts.unmatched) + ", incomplete steps " +
         std::to_string(o.counts.incomplete);
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/straggler_ddp_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf " + path).c_str()); }
  std::string path;
};

}  // namespace

TEST_CASE("fleet straggler ddp: a slow rank at equal SL is named, and called hardware") {
  if (!CanRun()) return;
  TempDir dir;
  Scenario s;
  s.slow_rank = 2;
  s.slow_ms = 40;  // about the forward pass's own time here: a rank about 1.5x as slow
  const Outcome o = Run(s, dir.path);
  MESSAGE(Describe(o));
  REQUIRE(o.steps >= static_cast<uint64_t>(s.steps) / 2);
  // Most steps (the alert's rule: more than half), on a loaded 2-core machine where 4 ranks
  // time-share 2 CPUs (measured: 82-100% of the steps; the wrong cause in 0-7%).
  CHECK(o.named * 2 > o.steps);
  CHECK(o.wrong_cause * 5 <= o.steps);
}

TEST_CASE(
    "fleet straggler ddp: a rank fed longer sequences is named, and called data, not hardware") {
  if (!CanRun()) return;
  TempDir dir;
  Scenario s;
  s.long_rank = 1;
  s.long_factor = 2;
  const Outcome o = Run(s, dir.path);
  MESSAGE(Describe(o));
  REQUIRE(o.steps >= static_cast<uint64_t>(s.steps) / 2);
  // Measured: named in 72-88% of the steps, called hardware in 5-10%.
  CHECK(o.named * 2 > o.steps);
  CHECK(o.wrong_cause * 5 <= o.steps);  // the long rank is not slow hardware
}

TEST_CASE("fleet straggler bench: slowdowns and imbalances swept (SEQPOINT_STRAGGLER_BENCH)") {
  const char* out_path = std::getenv("SEQPOINT_STRAGGLER_BENCH");
  if (out_path == nullptr) {
    MESSAGE("skipped: set SEQPOINT_STRAGGLER_BENCH=<file> to run the sweep (bench/fleet/)");
    return;
  }
  if (!CanRun()) return;
  const int steps = std::getenv("SEQPOINT_STRAGGLER_STEPS")
                        ? std::atoi(std::getenv("SEQPOINT_STRAGGLER_STEPS"))
                        : 60;
  std::ofstream out(out_path);
  out << "scenario,param,steps,named,wrong_cause,other_rank,unmatched,incomplete,"
         "median_lag_share\n";
  auto row = [&](const std::string& name, double param, const Outcome& o) {
    out << name << "," << param << "," << o.steps << "," << o.named << "," << o.wrong_cause << ","
        << o.other_rank << "," << o.counts.unmatched << "," << o.counts.incomplete << ","
        << o.median_lag_share << "\n";
    out.flush();
  };
  {
    TempDir dir;
    Scenario s;  // no straggler: how often an equal rank 2 is called one by chance
    s.steps = steps;
    s.slow_rank = 2;
    s.slow_ms = 0;
    row("none", 0, Run(s, dir.path));
  }
  for (double ms : {4.0, 8.0, 20.0, 40.0}) {
    TempDir dir;
    Scenario s;
    s.steps = steps;
    s.slow_rank = 2;
    s.slow_ms = ms;
    row("slow_ms", ms, Run(s, dir.path));
  }
  for (double f : {1.25, 2.0}) {
    TempDir dir;
    Scenario s;
    s.steps = steps;
    s.long_rank = 1;
    s.long_factor = f;
    row("long_factor", f, Run(s, dir.path));
  }
}
