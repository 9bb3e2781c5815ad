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
#include <map>
#include <sstream>

#include "agent/fleet/straggler.h"
#include "agent/fleet/straggler_events.h"
#include "agent/fleet/testing/torch_ddp.h"
#include "probes/collectives/collective_probes.h"
#include "probes/iteration_probes.h"
#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"

using namespace seqpoint::daemon::fleet;
using namespace seqpoint::probes;
using namespace seqpoint::probes::testing;

namespace {

bool CanRun() { return CanUseBpf() && seqpoint::daemon::fleet::testing::HasTorchDistributed(); }

struct Scenario {
  int ranks = 4;
  int steps = 40;
  int slow_rank = -1;
  double slow_ms = 0;
  double slow_factor = 1;  // the slow rank's compute before the collective, x (a hook's spin)
  int slow_from = 0;       // the step the slowdown starts
  int long_rank = -1;
  double long_factor = 1;
  bool bucketed = false;  // every rank the same SL per step
  std::string record;     // where to record the probes' events (replayable), if anywhere
};

struct Outcome {
  int ranks = 0;
  uint64_t steps = 0;        // judged
  uint64_t named = 0;        // straggling steps naming the expected rank with the expected cause
  uint64_t wrong_cause = 0;  // the expected rank, straggling, with the other cause
  uint64_t other_rank = 0;   // straggling steps naming another rank
  StragglerCounts counts;
  double median_lag_share = 0;  // over the steps naming the expected rank
  // The sequential test (slow_rank.h): its first alarm on the expected rank at or after
  // slow_from, in steps and seconds after step slow_from began (-1: never), and its alarms on
  // any other rank, or on the expected one before slow_from (false alarms).
  int64_t found_steps = -1;
  double found_s = -1;
  uint64_t false_alarms = 0;
  uint64_t tested_steps = 0;  // rank-steps the sequential test compared (SL-matched)
  double step_s = 0;          // median step time
};

// Runs the job with the probes attached and judges its steps; the expected rank and cause
// come from the scenario.
Outcome Run(const Scenario& s, const std::string& dir) {
  Outcome out;
  const char* src = std::getenv("SEQPOINT_SOURCE_DIR");
  REQUIRE(src != nullptr);
  std::vector<std::string> argv = {
      "/usr/bin/python3", std::string(src) + "/bench/fleet/ddp_straggler_job.py",
      "--ranks",          std::to_string(s.ranks),
      "--steps",          std::to_string(s.steps),
      "--trace-dir",      dir};
  if (s.slow_rank >= 0 && s.slow_factor <= 1) {
    argv.insert(argv.end(), {"--slow-rank", std::to_string(s.slow_rank), "--slow-ms",
                             std::to_string(s.slow_ms)});
  }
  if (s.slow_factor > 1) {
    argv.insert(argv.end(),
                {"--slow-rank", std::to_string(s.slow_rank), "--slow-factor",
                 std::to_string(s.slow_factor), "--slow-from", std::to_string(s.slow_from)});
  }
  if (s.bucketed) argv.insert(argv.end(), {"--batching", "bucketed"});
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
  REQUIRE(pids.size() == static_cast<size_t>(s.ranks));
  out.ranks = s.ranks;
  std::ofstream record;
  if (!s.record.empty()) {
    record.open(s.record);
    REQUIRE_MESSAGE(record.good(), "cannot write " << s.record);
    record << "# recorded by agent/fleet/straggler_ddp_test (agent/fleet/straggler_events.h)\n"
              "# job: ranks "
           << s.ranks << " steps " << s.steps << " slow_rank " << s.slow_rank << " slow_ms "
           << s.slow_ms << " slow_factor " << s.slow_factor << " slow_from " << s.slow_from
           << " long_rank " << s.long_rank << " long_factor " << s.long_factor << " batching "
           << (s.bucketed ? "bucketed" : "random") << "\n";
    for (size_t r = 0; r < pids.size(); ++r) {
      record << FormatRecordedEvent(
                    {'R', static_cast<uint32_t>(pids[r]), static_cast<int32_t>(r), 0, 0, 0, 0})
             << "\n";
    }
  }

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
  // Settled as the daemon settles, while the job runs: what waits stays within its bounds
  // (StragglerJoin::kMaxPending), however long the job.
  std::vector<StepVerdict> verdicts;
  auto settle = [&](uint64_t now_ns) {
    for (StepVerdict& v : join.Settle(now_ns)) verdicts.push_back(std::move(v));
  };
  auto poll = [&] {
    REQUIRE((*iterations)->Poll(50).ok());
    auto n = (*collectives)->Poll(0, [&](const CollectiveArrival& a) {
      join.OnArrival(a.pid, a.ts_ns);
      if (record.is_open()) {
        record << FormatRecordedEvent({'A', a.pid, -1, 0, 0, a.ts_ns, 0}) << "\n";
      }
    });
    REQUIRE(n.ok());
    for (; fed < sink.ends.size(); ++fed) {
      const IterationEvent& e = sink.ends[fed];
      if (!e.complete()) continue;
      join.OnIteration(e.pid, e.iter, e.tokens, e.begin_ns, e.end_ns);
      if (record.is_open()) {
        record << FormatRecordedEvent({'I', static_cast<uint32_t>(e.pid), -1, e.iter, e.tokens,
                                       e.begin_ns, e.end_ns})
               << "\n";
      }
    }
    settle(static_cast<uint64_t>(MonotonicMs()) * 1'000'000);
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
  // Step i's begin (the earliest rank's) from the iteration probes, for times.
  std::map<uint64_t, uint64_t> begin_of;
  for (const IterationEvent& e : sink.ends) {
    if (!e.complete()) continue;
    auto [it, fresh] = begin_of.emplace(e.iter, e.begin_ns);
    if (!fresh) it->second = std::min(it->second, e.begin_ns);
  }
  // The iteration probes number iterations from the first one seen; step k of the job is the
  // k-th iteration after the first.
  const uint64_t first_iter = begin_of.empty() ? 0 : begin_of.begin()->first;
  const uint64_t change_iter = first_iter + static_cast<uint64_t>(s.slow_from);
  settle(UINT64_MAX);
  for (const StepVerdict& v : verdicts) {
    for (int32_t r : v.slow_raised) {
      const bool slowed = s.slow_rank >= 0 && (s.slow_factor > 1 || s.slow_ms > 0);
      const bool right = r == expected_rank && slowed && v.iter >= change_iter;
      if (!right) {
        ++out.false_alarms;
      } else if (out.found_steps < 0) {
        out.found_steps = static_cast<int64_t>(v.iter - change_iter);
        if (begin_of.count(v.iter + 1) && begin_of.count(change_iter)) {
          // Known once the step's last arrival is in: about the next step's begin.
          out.found_s = static_cast<double>(begin_of[v.iter + 1] - begin_of[change_iter]) * 1e-9;
        }
      }
    }
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
  for (const auto& [rank, st] : out.counts.slow) out.tested_steps += st.tested;
  std::vector<double> steps;
  for (auto it = begin_of.begin(); it != begin_of.end() && std::next(it) != begin_of.end(); ++it) {
    steps.push_back(static_cast<double>(std::next(it)->second - it->second) * 1e-9);
  }
  std::sort(steps.begin(), steps.end());
  if (!steps.empty()) out.step_s = steps[steps.size() / 2];
  return out;
}

std::string Describe(const Outcome& o) {
  return std::to_string(o.steps) + " steps judged: expected rank and cause in " +
         std::to_string(o.named) + ", expected rank with the other cause in " +
         std::to_string(o.wrong_cause) + ", another rank straggling in " +
         std::to_string(o.other_rank) + "; unmatched rank-iterations " +
         std::to_string(o.counts.unmatched) + ", incomplete steps " +
         std::to_string(o.counts.incomplete) + "; sequential test: found after " +
         std::to_string(o.found_steps) + " steps (" + std::to_string(o.found_s) +
         " s), false alarms " + std::to_string(o.false_alarms) + ", median step " +
         std::to_string(o.step_s) + " s";
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
  auto env_int = [](const char* name, int def) {
    return std::getenv(name) ? std::atoi(std::getenv(name)) : def;
  };
  const int steps = env_int("SEQPOINT_STRAGGLER_STEPS", 60);
  // The sequential test's runs: SLOW_FROM steps of steady state, then as many slowed.
  const int slow_from = env_int("SEQPOINT_STRAGGLER_SLOW_FROM", 100);
  const char* record_dir = std::getenv("SEQPOINT_STRAGGLER_RECORD");
  std::ofstream out(out_path);
  out << "scenario,param,batching,ranks,steps,named,wrong_cause,other_rank,unmatched,incomplete,"
         "median_lag_share,found_steps,found_s,false_alarms,tested_rank_steps,median_step_s\n";
  auto row = [&](const std::string& name, double param, const Scenario& s, const Outcome& o) {
    out << name << "," << param << "," << (s.bucketed ? "bucketed" : "random") << "," << o.ranks
        << "," << o.steps << "," << o.named << "," << o.wrong_cause << "," << o.other_rank << ","
        << o.counts.unmatched << "," << o.counts.incomplete << "," << o.median_lag_share << ","
        << o.found_steps << "," << o.found_s << "," << o.false_alarms << "," << o.tested_steps
        << "," << o.step_s << "\n";
    out.flush();
  };
  // Optional filters: SEQPOINT_STRAGGLER_SCENARIOS (names, comma-separated: none, slow_ms,
  // long_factor, unslowed, slow_factor) and SEQPOINT_STRAGGLER_BATCHING (random, bucketed).
  auto wanted = [](const char* var, const std::string& name) {
    const char* v = std::getenv(var);
    return v == nullptr || ("," + std::string(v) + ",").find("," + name + ",") != std::string::npos;
  };
  auto run = [&](const std::string& name, double param, Scenario s) {
    if (!wanted("SEQPOINT_STRAGGLER_SCENARIOS", name) ||
        !wanted("SEQPOINT_STRAGGLER_BATCHING", s.bucketed ? "bucketed" : "random")) {
      return;
    }
    TempDir dir;
    if (record_dir != nullptr) {
      s.record = std::string(record_dir) + "/" + name + "_" + std::to_string(param) + "_" +
                 (s.bucketed ? "bucketed" : "random") + ".events";
    }
    row(name, param, s, Run(s, dir.path));
  };
  // The sequential test's slowdown factors; SEQPOINT_STRAGGLER_FACTORS (comma-separated, e.g.
  // "1,1.1") picks some.
  std::vector<double> factors = {1.0, 1.1, 1.2, 1.5};
  if (const char* f = std::getenv("SEQPOINT_STRAGGLER_FACTORS")) {
    factors.clear();
    std::istringstream list(f);
    for (std::string item; std::getline(list, item, ',');) factors.push_back(std::stod(item));
  }
  for (bool bucketed : {false, true}) {
    // Per step: no straggler (an equal rank 2 called one by chance), rank 2 sleeping in its
    // forward pass, rank 1 fed longer sequences.
    for (double ms : {0.0, 4.0, 8.0, 20.0, 40.0}) {
      Scenario s;
      s.steps = steps, s.slow_rank = 2, s.slow_ms = ms, s.bucketed = bucketed;
      run(ms == 0 ? "none" : "slow_ms", ms, s);
    }
    for (double f : {1.25, 2.0}) {
      Scenario s;
      s.steps = steps, s.long_rank = 1, s.long_factor = f, s.bucketed = bucketed;
      run("long_factor", f, s);
    }
    // Over steps (the sequential test): rank 2 F times as slow from step slow_from on; F = 1
    // measures the false alarms of an unslowed run of the same length.
    for (double f : factors) {
      Scenario s;
      s.steps = 2 * slow_from, s.slow_rank = 2, s.slow_factor = f, s.slow_from = slow_from;
      s.bucketed = bucketed;
      run(f == 1.0 ? "unslowed" : "slow_factor", f, s);
    }
  }
}
