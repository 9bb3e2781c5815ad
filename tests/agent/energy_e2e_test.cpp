// Energy on every iteration, end to end: seqpointd (the real binary, real eBPF probes) watches
// the probe tests' usdt_workload, a real process whose iterations busy-wait a fixed time, while
// this test plays the GPU firmware: it advances the real RX 6900 XT gpu_metrics table's energy
// accumulator at a known power in a scratch sysfs that the daemon reads (collectors.sysfs_root).
// The tolerance is the data's own: the counter lags real time by at most the longest gap
// between this test's counter updates (logged), so an interpolated boundary is off by at most
// power x that gap. Needs root (BPF); skips otherwise.
#include <doctest/doctest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>

#include "agent/energy/energy_sampler.h"
#include "agent/testing/gpu_energy_fixture.h"
#include "agent/testing/seqpointd_process.h"
#include "agent/testing/training_child.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

std::string Workload() { return BinaryDir() + "/probes/testing/usdt_workload"; }

using Firmware = GpuFirmware;

}  // namespace

TEST_CASE("agent energy e2e: every iteration of a live process gets power x its duration") {
  if (geteuid() != 0 || access(SeqpointdBinary().c_str(), X_OK) != 0 ||
      access(Workload().c_str(), X_OK) != 0) {
    MESSAGE("skipped: needs root (BPF), seqpointd and usdt_workload built");
    return;
  }
  GpuEnergyNode node;
  const double watts = 240;
  Firmware firmware(node, watts);
  TempDir dir;
  const std::string config = dir.Write("seqpointd.toml", R"(
[runs]
budget = 24
energy_sample_interval_ms = 10
[collectors]
sysfs_root = ")" + node.sys + R"("
[collectors.energy]
sources = ["gpu_metrics"]
)");
  Seqpointd d(dir, {"--config", config}, "seqpointd.log");
  REQUIRE_MESSAGE(d.Ready(), d.Log());
  const std::string key = "e2e-energy-" + std::to_string(getpid());
  std::string metrics;
  {
    TrainingChild w(key, {Workload(), "--wait", "--iters", "150", "--work-us", "20000",
                          "--seq-lens", "8,16,32,64"});
    REQUIRE(WaitFor([&] { return d.Show(key).is_object(); }));  // attached at exec
    firmware.ResetLag();
    w.SendLine();
    // Mid-run, the run's energy families are exported and clean under promtool.
    REQUIRE(WaitFor([&] {
      json s = d.Show(key);
      return s.is_object() && s["run"]["iterations"].get<uint64_t>() >= 60;
    }));
    metrics = d.Metrics();
    w.Wait();
  }
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  json status = d.Request("status");
  REQUIRE(status["energy"]["source"] == "gpu_metrics");
  MESSAGE("sampler: " << status["energy"].dump());
  // The daemon watches every process that carries the probes: another test's training process
  // running meanwhile is another run, and the node's energy is then nobody's (by design).
  size_t others = 0;
  const json runs = d.Request("runs", true);
  for (const json& other : runs["runs"]) others += other["key"] != key;
  const bool alone = others == 0;
  if (!alone) MESSAGE(others << " other runs shared the node: their overlap has no energy");
  for (const char* family : {"seqpoint_energy_source_info{", "seqpoint_energy_reads_total{",
                             "seqpoint_run_energy_iterations_total{",
                             "seqpoint_run_energy_unattributed_iterations_total{"}) {
    CHECK_MESSAGE(metrics.find(family) != std::string::npos, std::string(family));
  }
  if (alone) {
    for (const char* family : {"seqpoint_energy_interpolation_bracket_seconds{",
                               "metric=\"energy_joules\"", "seqpoint_run_observer_excess{"}) {
      CHECK_MESSAGE(metrics.find(family) != std::string::npos, std::string(family));
    }
  }
  if (std::system("command -v promtool > /dev/null 2>&1") == 0) {
    const std::string in = dir.Write("metrics.txt", metrics);
    CHECK(std::system(("promtool check metrics < '" + in + "'").c_str()) == 0);
  }
  ControlRequest r;
  r.cmd = "report";
  r.run = key;
  auto report = SendControlRequest(dir.path() + "/run/control.sock", r);
  REQUIRE(report.ok());
  // Per measured iteration: energy against power x the probes' own duration.
  // Each end is off by at most the counter's lag plus half the longest read the sampler keeps
  // (it timestamps a read at its middle).
  const double lag_uj =
      watts * static_cast<double>(firmware.max_lag_ns() + EnergySampler::kMaxReadNs / 2) * 1e-3;
  std::map<uint64_t, std::pair<double, double>> by_iter;  // iter -> (time_ns, energy_uj)
  for (const json& m : (*report)["measurements"]) {
    if (m["metric"] == "time_ns") by_iter[m["iter"]].first = m["value"];
    if (m["metric"] == "energy_uj") by_iter[m["iter"]].second = m["value"];
  }
  size_t checked = 0;
  double worst = 0;
  std::vector<double> errors;
  // An iteration may go without energy only when the sampler says why: a read it had to leave
  // out (slow: the daemon was starved of CPU) or that failed. Never silently, never many.
  const bool sampler_missed =
      status["energy"].value("slow_reads", 0) > 0 || status["energy"].value("failures", 0) > 0;
  size_t missing = 0;
  for (const auto& [iter, te] : by_iter) {
    if (te.first <= 0) continue;
    if (te.second <= 0) {
      ++missing;
      CHECK_MESSAGE((!alone || sampler_missed), "iteration " << iter << " has no energy");
      continue;
    }
    const double expected = watts * te.first * 1e-3;
    worst = std::max(worst, std::fabs(te.second - expected));
    errors.push_back(std::fabs(te.second - expected));
    CHECK(std::fabs(te.second - expected) <= lag_uj + 2 * node.count_uj());
    ++checked;
  }
  if (alone) CHECK(missing * 10 <= by_iter.size());
  if (missing > 0 && alone && !sampler_missed) {
    // Not yet explained (a rare failure of full ctest runs, never alone): what the daemon saw.
    std::istringstream lines(d.Metrics());
    std::string line, unattributed;
    while (std::getline(lines, line)) {
      if (line.rfind("seqpoint_run_energy_unattributed", 0) == 0) unattributed += line + "\n";
    }
    MESSAGE("unattributed: " << unattributed << "log:\n" << d.Log());
  }
  std::sort(errors.begin(), errors.end());
  MESSAGE(checked << " measured iterations: median |energy - P x time| "
                  << (errors.empty() ? 0.0 : errors[errors.size() / 2]) << " uJ, worst " << worst
                  << " uJ of ~" << watts * 20e6 * 1e-3 << " uJ; bound from the counter's "
                  << "largest lag " << firmware.max_lag_ns() / 1e6 << " ms: " << lag_uj << " uJ");
  if (!alone && checked < 10) {
    MESSAGE("skipped the rest: the node was shared for most of the run");
    return;
  }
  CHECK(checked >= 10);
  // Totals: every iteration observed has energy; the run's energy is power x its time.
  json show = d.Show(key);
  REQUIRE(show["projections"].contains("energy_uj"));
  const json& e = show["projections"]["energy_uj"];
  const json& t = show["projections"]["time_ns"];
  const uint64_t iterations = run["iterations"];
  CHECK(show["histogram"].size() == 4);
  if (!alone) return;  // the totals below need every iteration to have its energy
  uint64_t with_energy = 0;
  for (const json& b : show["histogram"])
    with_energy += b.contains("energy_uj_mean") && !b["energy_uj_mean"].is_null();
  CHECK(with_energy == 4);
  const double actual_e = e["actual"], actual_t = t["actual"];
  CHECK(std::fabs(actual_e - watts * actual_t * 1e-3) <=
        static_cast<double>(iterations) * (lag_uj + 2 * node.count_uj()));
  MESSAGE("run: " << iterations << " iterations, energy " << actual_e * 1e-6 << " J, power x time "
                  << watts * actual_t * 1e-9 << " J; projected " << e["total"].get<double>() * 1e-6
                  << " J [" << e["low"].get<double>() * 1e-6 << ", "
                  << e["high"].get<double>() * 1e-6 << "]");
  REQUIRE(show["self_checks"].contains("energy_uj"));
  const json& ce = show["self_checks"]["energy_uj"];
  const json& ct = show["self_checks"]["time_ns"];
  // Constant power: the energy projection errs exactly as the time projection does, up to the
  // counter's lag.
  CHECK(std::fabs(ce["error"].get<double>() - ct["error"].get<double>()) <=
        (lag_uj + 2 * node.count_uj()) / (watts * 20e6 * 1e-3));
  MESSAGE("self-checks: time " << ct.dump() << "\nenergy " << ce.dump());
  // The energy interval is the wider one (the counter's lag adds noise), so it holds whenever
  // the time interval does.
  if (ct["within_interval"].get<bool>()) CHECK(ce["within_interval"].get<bool>());
}
