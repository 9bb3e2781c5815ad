// Energy on every iteration, end to end: seqpointd (the real binary, real eBPF probes) watches
// the probe tests' usdt_workload, a real process whose iterations busy-wait a fixed time, while
// this test plays the GPU firmware: it advances the real RX 6900 XT gpu_metrics table's energy
// accumulator at a known power in a scratch sysfs that the daemon reads (collectors.sysfs_root).
// The tolerance is the data's own: the counter lags real time by at most the longest gap
// between this test's counter updates (logged), so an interpolated boundary is off by at most
// power x that gap. The daemon watches this test's process alone (runs.only_key): the node's
// energy is a run's whole only while no other watched run iterates, and other tests' processes
// carrying the probes run beside this one under ctest -j. Needs root (BPF); skips otherwise.
#include <doctest/doctest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

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
  const std::string key = "e2e-energy-" + std::to_string(getpid());
  const std::string config = dir.Write("seqpointd.toml", R"(
[runs]
only_key = ")" + key + R"("
budget = 24
energy_sample_interval_ms = 10
[collectors]
sysfs_root = ")" + node.sys + R"("
[collectors.energy]
sources = ["gpu_metrics"]
)");
  Seqpointd d(dir, {"--config", config}, "seqpointd.log");
  REQUIRE_MESSAGE(d.Ready(), d.Log());
  // Families exported with their data: the bracket width after the first interpolation (an
  // iteration settled at the sampler's next sample), the energy projection and self-check once
  // measured iterations have energy. Scraped until all are there or the run nears its end.
  const std::vector<std::string> families = {"seqpoint_energy_source_info{",
                                             "seqpoint_energy_reads_total{",
                                             "seqpoint_run_energy_iterations_total{",
                                             "seqpoint_run_energy_unattributed_iterations_total{",
                                             "seqpoint_energy_interpolation_bracket_seconds{",
                                             "metric=\"energy_joules\"",
                                             "seqpoint_run_observer_excess{"};
  auto all_there = [&](const std::string& text) {
    return std::all_of(families.begin(), families.end(),
                       [&](const std::string& f) { return text.find(f) != std::string::npos; });
  };
  std::string metrics;
  json energy;  // the run's own account of its iterations' energy, once every one is settled
  {
    TrainingChild w(key, {Workload(), "--wait", "--hold", "--iters", "150", "--work-us", "20000",
                          "--seq-lens", "8,16,32,64"});
    REQUIRE(WaitFor([&] { return d.Show(key).is_object(); }));  // attached at exec
    firmware.ResetLag();
    w.SendLine();
    // Mid-run, the run's energy families are exported and clean under promtool.
    auto iterations = [&] {  // a run no longer shown has ended
      json s = d.Show(key);
      return s.is_object() ? s["run"]["iterations"].get<uint64_t>() : UINT64_MAX;
    };
    REQUIRE(WaitFor([&] { return iterations() >= 60; }));
    WaitFor([&] {
      metrics = d.Metrics();
      return all_there(metrics) || iterations() >= 140;
    });
    // Held after its last iteration (--hold): the run is live until each of its iterations has
    // energy or is counted without, with the reason (seqpoint_run_energy_unattributed_*).
    WaitFor(
        [&] {
          json s = d.Show(key);
          if (!s.is_object() || !s["energy"].is_object()) return false;
          energy = s["energy"];
          uint64_t settled = 0;
          for (const auto& [name, n] : energy.items()) {
            if (name == "iterations" || name.rfind("unattributed_", 0) == 0) {
              settled += n.get<uint64_t>();
            }
          }
          return s["run"]["iterations"].get<uint64_t>() >= 150 && settled >= 150;
        },
        std::chrono::seconds(60));
    w.SendLine();
    w.Wait();
  }
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  json status = d.Request("status");
  REQUIRE(status["energy"]["source"] == "gpu_metrics");
  MESSAGE("sampler: " << status["energy"].dump());
  // runs.only_key: no other run on the node, so every iteration's energy is the node's whole.
  const json runs = d.Request("runs", true);
  for (const json& other : runs["runs"]) {
    CHECK_MESSAGE(other["key"] == key, "another run was watched: " << other.dump());
  }
  for (const std::string& family : families) {
    CHECK_MESSAGE(metrics.find(family) != std::string::npos, family);
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
  // (it timestamps a read at its middle): kMaxReadNs, or where the sampler keeps slower reads
  // (those shorter than the counter's update period it measured, status update_period_ms), the
  // slowest of those (status max_read_ms is the slowest read of all).
  const json& sampler = status["energy"];
  const double max_read_ns = std::max(
      static_cast<double>(EnergySampler::kMaxReadNs),
      std::min(sampler.value("max_read_ms", 0.0), sampler.value("update_period_ms", 0.0)) * 1e6);
  const double lag_uj =
      watts * (static_cast<double>(firmware.max_lag_ns()) + max_read_ns / 2) * 1e-3;
  std::map<uint64_t, std::pair<double, double>> by_iter;  // iter -> (time_ns, energy_uj)
  for (const json& m : (*report)["measurements"]) {
    if (m["metric"] == "time_ns") by_iter[m["iter"]].first = m["value"];
    if (m["metric"] == "energy_uj") by_iter[m["iter"]].second = m["value"];
  }
  size_t checked = 0;
  double worst = 0;
  std::vector<double> errors;
  // An iteration may go without energy only when the daemon says why: the run counts every
  // iteration it gave none, with the reason (show's "energy": unattributed_*). Never silently,
  // never many.
  REQUIRE_MESSAGE(energy.is_object(), "the run never showed its energy account");
  uint64_t unattributed = 0;
  for (const auto& [name, n] : energy.items()) {
    if (name.rfind("unattributed_", 0) == 0) unattributed += n.get<uint64_t>();
  }
  MESSAGE("the run's energy: " << energy.dump());
  size_t missing = 0;
  for (const auto& [iter, te] : by_iter) {
    if (te.first <= 0) continue;
    if (te.second <= 0) {
      ++missing;
      MESSAGE("iteration " << iter << " has no energy");
      continue;
    }
    const double expected = watts * te.first * 1e-3;
    worst = std::max(worst, std::fabs(te.second - expected));
    errors.push_back(std::fabs(te.second - expected));
    CHECK_MESSAGE(std::fabs(te.second - expected) <= lag_uj + 2 * node.count_uj(),
                  "iteration " << iter << ": " << te.second << " uJ over " << te.first * 1e-6
                               << " ms, P x time " << expected << " uJ");
    ++checked;
  }
  CHECK_MESSAGE(missing <= unattributed, missing << " measured iterations without energy, "
                                                 << unattributed << " counted with a reason");
  CHECK(missing * 10 <= by_iter.size());
  std::sort(errors.begin(), errors.end());
  MESSAGE(checked << " measured iterations: median |energy - P x time| "
                  << (errors.empty() ? 0.0 : errors[errors.size() / 2]) << " uJ, worst " << worst
                  << " uJ of ~" << watts * 20e6 * 1e-3 << " uJ; bound from the counter's "
                  << "largest lag " << firmware.max_lag_ns() / 1e6 << " ms: " << lag_uj << " uJ");
  CHECK(checked >= 10);
  // Totals: every iteration observed has energy; the run's energy is power x its time.
  json show = d.Show(key);
  REQUIRE(show["projections"].contains("energy_uj"));
  const json& e = show["projections"]["energy_uj"];
  const json& t = show["projections"]["time_ns"];
  const uint64_t iterations = run["iterations"];
  CHECK(show["histogram"].size() == 4);
  uint64_t with_energy = 0;
  for (const json& b : show["histogram"])
    with_energy += b.contains("energy_uj_mean") && !b["energy_uj_mean"].is_null();
  CHECK(with_energy == 4);
  // The truth is given even for a projection left out (control_views.cpp).
  REQUIRE_MESSAGE((e["actual"].is_number() && t["actual"].is_number()), show["projections"].dump());
  const double actual_e = e["actual"], actual_t = t["actual"];
  CHECK(std::fabs(actual_e - watts * actual_t * 1e-3) <=
        static_cast<double>(iterations) * (lag_uj + 2 * node.count_uj()));
  MESSAGE("run: " << iterations << " iterations, energy " << actual_e * 1e-6 << " J, power x time "
                  << watts * actual_t * 1e-9 << " J; energy projection " << e.dump());
  REQUIRE(show["self_checks"].contains("energy_uj"));
  const json& ce = show["self_checks"]["energy_uj"];
  const json& ct = show["self_checks"]["time_ns"];
  // Constant power: the energy projection errs exactly as the time projection does, up to the
  // counter's lag.
  CHECK(std::fabs(ce["error"].get<double>() - ct["error"].get<double>()) <=
        (lag_uj + 2 * node.count_uj()) / (watts * 20e6 * 1e-3));
  MESSAGE("self-checks: time " << ct.dump() << "\nenergy " << ce.dump());
  // A projection whose self-check missed is never printed (left out, with the reason).
  if (!ce["within_interval"].get<bool>()) CHECK(e.contains("left_out"));
  // The energy interval is the wider one (the counter's lag adds noise), so it holds whenever
  // the time interval does, while the sampler keeps every iteration's energy sharp. Where it says
  // they are smeared (each spread over about one counter update of its neighbours: a counter
  // update period over a tenth of an iteration, status "smeared"), a measured iteration's
  // energy stands for its neighbours' too, and the interval may miss (the projection is then
  // left out, as above).
  const uint64_t smeared = status["energy"].value("smeared", uint64_t{0});
  if (ct["within_interval"].get<bool>() && smeared == 0) CHECK(ce["within_interval"].get<bool>());
}
