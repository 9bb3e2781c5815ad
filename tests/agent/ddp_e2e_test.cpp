// seqpointd on a real data-parallel PyTorch job: examples/launch_ddp.py starts 2 ranks of
// examples/train_torch.py --ddp (gloo on CPU, gradients all-reduced every iteration) with
// torchrun's environment; the ranks are marked with seqpoint_probe (2- and 4-rank jobs on a
// replayed GPU energy table check step energy, at the end of this file). The daemon must see one
// run of 2 ranks whose steps are the ranks' iterations joined, and its projections must agree
// with the ranks' own measurements: the step time (first rank's begin to last rank's end, from
// each rank's CLOCK_MONOTONIC stamps) and the CPU time summed over the ranks against
// perf:task-clock. Needs root (eBPF), python3-torch and the build's seqpoint_probe library.
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "agent/energy/energy_sampler.h"
#include "agent/testing/gpu_energy_fixture.h"
#include "agent/testing/seqpointd_process.h"
#include "agent/testing/training_child.h"
#include "common/trace_csv.h"
#include "tests/agent/exit_test_helpers.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

bool CanRun() {
  if (!CanRunProbes()) return false;
  if (std::system("/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null") != 0) {
    MESSAGE("skipped: python3-torch is not installed");
    return false;
  }
  return true;
}

constexpr const char* kCollectiveSteps = "seqpoint_run_collective_steps_total";

}  // namespace

TEST_CASE("agent ddp e2e: a 2-rank gloo job under torchrun's environment is one run of steps") {
  if (!CanRun()) return;
  constexpr int kIterations = 120;
  TempDir dir;
  const std::string config = dir.File("seqpointd.toml");
  {
    std::ofstream out(config);
    out << "[collectors]\nperf.events = [\"task-clock\"]\n";
  }
  Seqpointd d(dir, {"--config", config}, "seqpointd.log");
  REQUIRE(d.Ready());
  const std::string job = "ddp-e2e-" + std::to_string(getpid());
  const std::string key = "torchrun:" + job;
  {
    // The launcher is the test's child (TrainingChild also sets SEQPOINT_RUN_ID, which the
    // torchrun variables outrank).
    TrainingChild launch(
        key,
        {"/usr/bin/python3", SourceDir() + "/examples/launch_ddp.py", "--ranks", "2", "--style",
         "torchrun", "--job-id", job, "--", "/usr/bin/python3",
         SourceDir() + "/examples/train_torch.py", "--ddp", "--iterations",
         std::to_string(kIterations), "--hidden", "32", "--trace", dir.File("rank{rank}.csv")},
        StderrTo(dir.File("train.log")));
    // While it trains: show has the ranks, as the launcher announced them.
    json ranks;
    WaitFor([&] {
      json live = d.Show(key);
      if (live.is_object() && live.contains("ranks")) ranks = live["ranks"];
      if (ranks.is_null() || ranks["ranks"].size() != 2) return false;
      for (const json& r : ranks["ranks"]) {
        if (r["status"] != "live") return false;
      }
      return true;
    });
    REQUIRE_MESSAGE(!ranks.is_null(), d.Log());
    CHECK(ranks["expected"] == 2);
    CHECK(ranks["world_size"] == 2);
    CHECK(ranks["ranks"].size() == 2);
    for (const json& r : ranks["ranks"]) CHECK(r["status"] == "live");
    // Each rank's entry into gloo's allreduce is probed (probes/collectives/collective_probes.h):
    // while
    // the job trains, its steps are judged for a straggler and counted on /metrics.
    const bool judged = WaitFor([&] { return SumOf(d.Metrics(), kCollectiveSteps) > 0; });
    CHECK_MESSAGE(judged, d.Metrics());
    int status = launch.Wait();
    REQUIRE_MESSAGE(WIFEXITED(status), ReadFile(dir.File("train.log")));
    REQUIRE_MESSAGE(WEXITSTATUS(status) == 0, ReadFile(dir.File("train.log")));
  }
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  CHECK(run["launcher"] == "torchrun");
  CHECK(run["job_id"] == job);
  CHECK(run["pids"].size() == 2);
  CHECK(run["state"] == "finished");
  // Steps, not rank-iterations: as many as each rank ran (a few may be missed at attach).
  const uint64_t steps = run["iterations"];
  const uint64_t missed = run["unobserved"];
  CHECK(steps + missed == kIterations);
  // Missed only while the probes attach: each rank runs a few iterations before its library
  // load is seen and attached, up to about a second on a loaded 2-core machine (15 steps of
  // ~65 ms). Every step is accounted for either way (the line above).
  CHECK_MESSAGE(missed <= 15, d.Log());
  CHECK(d.Log().find("is data-parallel") != std::string::npos);

  // The ranks' own measurements, joined into the same steps.
  std::map<uint64_t, std::pair<double, double>> span;  // iter -> (first begin, last end)
  double cpu_total = 0;
  std::map<uint64_t, std::pair<int, double>> cpu_of;  // iter -> (ranks, CPU time summed)
  for (int rank = 0; rank < 2; ++rank) {
    auto t = seqpoint::LoadTrace(dir.File("rank" + std::to_string(rank) + ".csv"));
    REQUIRE(t.ok());
    const int b = t->MetricIndex("mono_begin_ns"), e = t->MetricIndex("mono_end_ns");
    const int cpu = t->MetricIndex("cpu_ns");
    REQUIRE(b >= 0);
    for (size_t r = 0; r < t->rows(); ++r) {
      // The projection stands for the whole run, the steps missed at attach included (its
      // unobserved part): so does the ranks' own total.
      cpu_total += t->metrics[cpu][r];
      if (t->iter[r] < missed) continue;
      auto [it, first] = span.try_emplace(t->iter[r], t->metrics[b][r], t->metrics[e][r]);
      if (!first) {
        it->second.first = std::min(it->second.first, t->metrics[b][r]);
        it->second.second = std::max(it->second.second, t->metrics[e][r]);
      }
      auto& [ranks_in, cpu_sum] = cpu_of[t->iter[r]];
      ++ranks_in;
      cpu_sum += t->metrics[cpu][r];
    }
  }
  double step_total = 0;
  for (const auto& [iter, s] : span) step_total += s.second - s.first;

  json show = d.Show(key);
  REQUIRE(show.is_object());
  const double probe_total = show["self_check"]["actual"];
  const double projected = show["projections"]["time_ns"]["total"];
  MESSAGE("steps " << steps << ", step time: probes " << probe_total << " ns, ranks' own "
                   << step_total << " ns, projected " << projected << " (self-check error "
                   << show["self_check"]["error"] << ")");
  // The same spans measured two ways (probes vs the trainer's clock reads around the same code).
  CHECK(std::fabs(probe_total - step_total) / step_total < 0.10);
  CHECK(std::fabs(projected - probe_total) / probe_total < 0.15);
  // A measured step's counters are summed over both ranks: the projection of task-clock is the
  // whole job's CPU time.
  REQUIRE(show["projections"].contains("perf:task-clock"));
  const json& tc = show["projections"]["perf:task-clock"];
  const double clock = tc["total"];
  MESSAGE("task-clock projected " << clock << " ns [" << tc["low"] << ", " << tc["high"]
                                  << "], ranks' own CPU time summed " << cpu_total << " ns ("
                                  << 100 * (clock - cpu_total) / cpu_total << "%)");
  // Each measured step's task-clock is read at the probes of its ranks (in-kernel counting,
  // every thread of each rank) and summed: it must agree with the ranks' own process CPU time
  // of the same iteration (read by the trainer just inside the probes, so a few microseconds
  // less), step by step. A step where some rank's window was flagged at the probes has no
  // task-clock (left out, never summed over the other ranks only).
  json report;
  {
    ControlRequest r;
    r.cmd = "report";
    r.run = key;
    auto answer = SendControlRequest(dir.path() + "/run/control.sock", r);
    REQUIRE_MESSAGE(answer.ok(), answer.status().message());
    report = *answer;
  }
  int steps_checked = 0, steps_off = 0;
  for (const json& m : report["measurements"]) {
    if (m["metric"] != "perf:task-clock") continue;
    auto own = cpu_of.find(m["iter"].get<uint64_t>());
    if (own == cpu_of.end() || own->second.first != 2) continue;
    const double err = (m["value"].get<double>() - own->second.second) / own->second.second;
    ++steps_checked;
    if (std::fabs(err) >= 0.05) {
      ++steps_off;
      MESSAGE("step " << m["iter"] << ": task-clock " << m["value"] << " ns, ranks' own "
                      << own->second.second << " ns (" << 100 * err << "%)");
    }
  }
  MESSAGE(steps_checked << " measured steps checked against the ranks' own CPU time, " << steps_off
                        << " off by 5% or more");
  CHECK(steps_checked > 0);
  CHECK(steps_off == 0);
  // The ranks' own total, every step of the run, lies inside the projection's 95% interval.
  // (Issue 19: the misses seen before were this test's, which left the steps missed at attach
  // out of the ranks' total while the projection counts them; and steps whose task-clock was
  // summed over one rank when the other's window was flagged, now left out.)
  if (!tc["high"].is_null()) CHECK(cpu_total <= tc["high"].get<double>());
  CHECK(cpu_total >= tc["low"].get<double>());
  CHECK(std::fabs(clock - cpu_total) / cpu_total < 0.40);
}

TEST_CASE("agent ddp e2e: a rank that dies mid-run: the run goes on with the rest, and says so") {
  if (!CanRun()) return;
  const std::string workload = BinaryDir() + "/probes/testing/usdt_workload";
  if (access(workload.c_str(), X_OK) != 0) return;
  TempDir dir;
  Seqpointd d(dir, {}, "seqpointd.log");
  REQUIRE(d.Ready());
  // Two processes of one job (SEQPOINT_RUN_ID): the second dies inside its 81st iteration.
  const std::string key = "ddp-e2e-crash-" + std::to_string(getpid());
  TrainingChild a(
      key, {workload, "--wait", "--iters", "200", "--work-us", "500", "--seq-lens", "8,16,32"},
      QuietStdout());
  TrainingChild b(key,
                  {workload, "--wait", "--iters", "80", "--work-us", "500", "--seq-lens", "8,16,32",
                   "--exit-mid"},
                  QuietStdout());
  REQUIRE(WaitFor([&] {
    json s = d.Show(key);
    return s.is_object() && s.contains("ranks") && s["ranks"]["ranks"].size() == 2;
  }));
  a.SendLine();
  b.SendLine();
  b.Wait();
  a.Wait();
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  // Steps: the survivor's 200 iterations, the first 80 of them joined with the other rank's.
  CHECK_MESSAGE(run["iterations"].get<uint64_t>() >= 200, std::string(run.dump() + "\n" + d.Log()));
  CHECK(run["iterations"].get<uint64_t>() <= 201);
  CHECK(run["state"] == "crashed");  // a rank crashed: the run says so when it closes
  const std::string log = d.Log();
  CHECK_MESSAGE(
      log.find("in the middle of an iteration; the run goes on with 1 rank") != std::string::npos,
      log);
}

// Issue 19: the run above once closed with 88 steps where its survivor ran 200. The daemon's
// idle check (every 5 s) found the survivor gone from /proc before the source had reported its
// exit, and closed the run there, while the survivor's last end records still waited in the
// kernel (records of iterations without begin hooks are batched: read at
// probes.poll_interval_ms, or when the process's exit is reported): they came after the run had
// closed and were dropped as a stray pid's. On a loaded node both conditions are common: a
// daemon starved of CPU runs its due timers, the idle check among them, beside its poll (and an
// exit event woke it only when nothing else waited in discovery's ring, where any process's
// library load queues a record that wakes nobody; exits of watched processes now force a
// wake-up). This test makes the idle check find the survivor gone with its exit unread: every
// record batched (warm-up: no begin hooks), the iteration ring read once a minute and discovery
// every 10 minutes, a library load (this process's dlopen) queued before the survivor exits,
// and the daemon stopped (SIGSTOP) from before that exit until its idle check is due. Every
// step must still be in the run, and the rank's crash said. (Exit events lost outright:
// lost_exit_e2e_test.cpp.)

TEST_CASE("agent ddp e2e: a run whose processes' exits are seen late closes with every step") {
  if (!CanRun()) return;
  if (access(UsdtWorkload().c_str(), X_OK) != 0) {
    MESSAGE("skipped: usdt_workload is not built");
    return;
  }
  TempDir dir;
  const std::string key = "ddp-e2e-late-exit-" + std::to_string(getpid());
  const std::string out = dir.File("survivor.out");
  // Both ranks wait for a line before their first iteration; the survivor prints "done" after
  // its last and exits at the next line (--hold). Started before the daemon, they are found by
  // its first scan of /proc, not by a timed poll of discovery.
  TrainingChild a(key,
                  HeldRank("--wait --hold --iters 200 --work-us 5000 --seq-lens 8,16,32", out));
  TrainingChild b(key,
                  {UsdtWorkload(), "--wait", "--iters", "80", "--work-us", "5000", "--seq-lens",
                   "8,16,32", "--exit-mid"},
                  QuietStdout());
  // Both are the workload (the shell has exec'd the survivor) when the daemon scans /proc.
  REQUIRE(WaitFor([&] { return IsWorkload(a.pid()) && IsWorkload(b.pid()); }));
  const std::string config = SleepyDaemonConfig(dir, key, "warmup_iterations = 1000000\n");
  Seqpointd d(dir, {"--config", config}, "seqpointd.log");
  REQUIRE(d.Ready());
  REQUIRE_MESSAGE(RanksJoined(d, key, 2), d.Log());
  a.SendLine();
  b.SendLine();
  b.Wait();
  // The rank's exit is read (its records and the survivor's so far with it) while the survivor
  // still runs: its later iterations wait in the kernel, batched.
  const char* goes_on = "in the middle of an iteration; the run goes on with 1 rank";
  REQUIRE_MESSAGE(WaitFor([&] { return d.Log().find(goes_on) != std::string::npos; }), d.Log());
  REQUIRE(WaitFor([&] { return ReadFile(out).find("done") != std::string::npos; }));
  usleep(100'000);  // the daemon waits in its loop
  d.Signal(SIGSTOP);
  const bool queued = !UnloadedLibrary().empty();
  a.SendLine();
  a.Wait();           // reaped: gone from /proc before the daemon reads its exit
  usleep(5'500'000);  // the idle check is due
  d.Signal(SIGCONT);
  REQUIRE_MESSAGE(queued, "no library to load here");
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  MESSAGE("closed with " << run["iterations"] << " steps, " << run["unobserved"]
                         << " unobserved, state " << run["state"]);
  CHECK_MESSAGE(run["iterations"].get<uint64_t>() >= 200, std::string(run.dump() + "\n" + d.Log()));
  CHECK(run["iterations"].get<uint64_t>() <= 201);
  CHECK(run["state"] == "crashed");
  const std::string log = d.Log();
  CHECK_MESSAGE(log.find(goes_on) != std::string::npos, log);
  // No record of the run's processes came after they were taken for gone.
  CHECK(SumOf(d.Metrics(), "seqpoint_source_unannounced_events_total") == 0);
}

// Step energy (issue: a DDP run's energy came out k times too low, and each rank's GPU reading
// was added k times): the test plays the GPU firmware (the real RX 6900 XT gpu_metrics table,
// its accumulator advanced at a known power), and a k-rank gloo job runs. Each device is
// counted once: a measured step's energy is the node's over the step (power x the step's time,
// from the first rank's begin to the last rank's end), and the run's energy is the node's over
// its steps, not 1/k of it.
static void CheckStepEnergy(int ranks) {
  constexpr int kIterations = 60;
  GpuEnergyNode node;
  const double watts = 300;
  GpuFirmware firmware(node, watts);
  TempDir dir;
  const std::string config = dir.Write("seqpointd.toml", R"(
[runs]
energy_sample_interval_ms = 10
[collectors]
perf.events = ["task-clock"]
sysfs_root = ")" + node.sys + R"("
[collectors.energy]
sources = ["gpu_metrics"]
)");
  Seqpointd d(dir, {"--config", config}, "seqpointd.log");
  REQUIRE_MESSAGE(d.Ready(), d.Log());
  const std::string job = "ddp-energy-" + std::to_string(ranks) + "-" + std::to_string(getpid());
  const std::string key = "torchrun:" + job;
  {
    TrainingChild launch(
        key,
        {"/usr/bin/python3", SourceDir() + "/examples/launch_ddp.py", "--ranks",
         std::to_string(ranks), "--style", "torchrun", "--job-id", job, "--", "/usr/bin/python3",
         SourceDir() + "/examples/train_torch.py", "--ddp", "--iterations",
         std::to_string(kIterations), "--hidden", "32", "--trace", dir.File("rank{rank}.csv")},
        StderrTo(dir.File("train.log")));
    WaitFor([&] { return d.Show(key).is_object(); });
    firmware.ResetLag();
    int status = launch.Wait();
    REQUIRE_MESSAGE(WIFEXITED(status), ReadFile(dir.File("train.log")));
    REQUIRE_MESSAGE(WEXITSTATUS(status) == 0, ReadFile(dir.File("train.log")));
  }
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  CHECK(run["pids"].size() == static_cast<size_t>(ranks));
  size_t others = 0;
  for (const json& other : d.Request("runs", true)["runs"]) others += other["key"] != key;
  // Other training processes on this machine (tests beside this one) are runs of this daemon
  // too; the log names every run that started.
  const std::string started = d.Log();
  for (size_t at = started.find(") started by pid"); at != std::string::npos;
       at = started.find(") started by pid", at + 1)) {
    const size_t line = started.rfind('\n', at);
    others += started.substr(line == std::string::npos ? 0 : line, at - line).find(key) ==
              std::string::npos;
  }
  const bool alone = others == 0;
  if (!alone) {
    MESSAGE(others << " other runs shared the node: a step their iterations overlap gets its "
                      "share of the node's energy, less than the node's");
  }
  json status = d.Request("status");
  const bool sampler_missed =
      status["energy"].value("slow_reads", 0) > 0 || status["energy"].value("failures", 0) > 0;
  ControlRequest r;
  r.cmd = "report";
  r.run = key;
  auto report = SendControlRequest(dir.path() + "/run/control.sock", r);
  REQUIRE(report.ok());
  // Each end of a step is off by at most the counter's lag plus half the longest read the
  // sampler keeps, and by a count of the accumulator.
  const double bound_uj =
      watts * static_cast<double>(firmware.max_lag_ns() + EnergySampler::kMaxReadNs / 2) * 1e-3 +
      2 * node.count_uj();
  std::map<uint64_t, std::pair<double, double>> by_step;  // step -> (time_ns, energy_uj)
  for (const json& m : (*report)["measurements"]) {
    if (m["metric"] == "time_ns") by_step[m["iter"]].first = m["value"];
    if (m["metric"] == "energy_uj") by_step[m["iter"]].second = m["value"];
  }
  size_t checked = 0, missing = 0, shared = 0;
  double worst_ratio = 1;
  for (const auto& [step, te] : by_step) {
    if (te.first <= 0) continue;
    if (te.second <= 0) {
      ++missing;
      CHECK_MESSAGE((!alone || sampler_missed), "step " << step << " has no energy");
      continue;
    }
    const double node_uj = watts * te.first * 1e-3;  // the node's energy over the step
    const double ratio = te.second / node_uj;
    // Never more than the node's; less only where another run's iterations overlapped it.
    CHECK(te.second <= node_uj + bound_uj);
    if (!alone && te.second < node_uj - bound_uj) {
      ++shared;
      continue;
    }
    if (std::fabs(ratio - 1) > std::fabs(worst_ratio - 1)) worst_ratio = ratio;
    CHECK_MESSAGE(std::fabs(te.second - node_uj) <= bound_uj,
                  "step " << step << ": " << te.second << " uJ against the node's " << node_uj
                          << " uJ (x" << ratio << "; 1/" << ranks << " would be the old bug)");
    ++checked;
  }
  MESSAGE(ranks << " ranks: " << checked << " measured steps, step energy / node energy worst x"
                << worst_ratio << " (bound " << bound_uj << " uJ per step); " << shared
                << " shared with other runs");
  if (!alone && checked < 5) return;  // the node was shared for most of the run
  CHECK(checked >= 5);
  if (!alone) return;  // the totals need every step to have its energy
  CHECK(missing * 10 <= by_step.size());
  json show = d.Show(key);
  REQUIRE(show["projections"].contains("energy_uj"));
  const double actual_e = show["projections"]["energy_uj"]["actual"];
  const double actual_t = show["projections"]["time_ns"]["actual"];
  const uint64_t steps = run["iterations"];
  // The run's energy is the node's over its steps (each device once, never divided by ranks).
  MESSAGE("run: " << steps << " steps, energy " << actual_e * 1e-6 << " J, node's power x step "
                  << "time " << watts * actual_t * 1e-9 << " J (x"
                  << actual_e / (watts * actual_t * 1e-3) << ")");
  if (!sampler_missed) {
    CHECK(std::fabs(actual_e - watts * actual_t * 1e-3) <= static_cast<double>(steps) * bound_uj);
  }
}

TEST_CASE("agent ddp e2e: a 2-rank job's step energy is the node's energy over each step") {
  if (!CanRun()) return;
  CheckStepEnergy(2);
}

TEST_CASE("agent ddp e2e: a 4-rank job's step energy is the node's energy over each step") {
  if (!CanRun()) return;
  CheckStepEnergy(4);
}
