// seqpointd reading perf counters in the iteration probes, end to end: the real binary watches
// probes/testing/counter_workload (three threads burning CPU inside every iteration) and its
// measured iterations get perf:task-clock from the probes (seqpoint_collector_windows_total
// where="probe"), or, with collectors.perf.in_probe = false, from the user-space perf collector
// as before, whose late start is then measured (seqpoint_collector_start_offset_seconds).
// Needs root (BPF); skips otherwise.
#include <doctest/doctest.h>
#include <unistd.h>

#include <sstream>

#include "agent/testing/seqpointd_process.h"
#include "agent/testing/training_child.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

std::string Workload() { return BinaryDir() + "/probes/testing/counter_workload"; }

bool CanRun() {
  return CanRunProbes() && access(Workload().c_str(), X_OK) == 0;
}

// The value of the exposition line that starts with `series` ("name{labels}"); -1 if none.
double MetricValue(const std::string& metrics, const std::string& series) {
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// Runs the workload under a daemon with `toml`; returns its run's `show` and the daemon's
// /metrics at the end.
std::pair<json, std::string> Watch(const std::string& key, const std::string& toml) {
  TempDir dir;
  Seqpointd d(dir, {"--config", dir.Write("c.toml", toml)}, "seqpointd.log");
  REQUIRE(d.Ready());
  TrainingChild w(key,
                  {Workload(), "--wait", "--iters", "150", "--threads", "2", "--work-us", "1000"},
                  QuietStdout());
  REQUIRE(WaitFor([&] { return d.Show(key).is_object(); }));  // attached at exec
  w.SendLine();
  REQUIRE(w.Wait() == 0);
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  json show = d.Show(key);
  REQUIRE(show.is_object());
  REQUIRE_MESSAGE(show["projections"].contains("perf:task-clock"), d.Log());
  CHECK(show["projections"]["perf:task-clock"]["measured"].get<uint64_t>() > 0);
  return {show, d.Metrics()};
}

}  // namespace

TEST_CASE("probe counters e2e: measured iterations get their perf counters from the probes") {
  if (!CanRun()) return;
  auto [show, metrics] = Watch("e2e-probe-counters-" + std::to_string(getpid()), "");
  const double probe = MetricValue(metrics, R"(seqpoint_collector_windows_total{where="probe"})");
  const double user = MetricValue(metrics, R"(seqpoint_collector_windows_total{where="user_space"})");
  const uint64_t measured = show["projections"]["perf:task-clock"]["measured"];
  MESSAGE("windows at the probes " << probe << ", from user space " << user << "; task-clock "
                                   << "measured on " << measured << " iterations");
  CHECK(probe >= static_cast<double>(measured));
  CHECK(show["projections"].contains("perf:context-switches"));
}

TEST_CASE("probe counters e2e: with in_probe off the perf collector counts from user space") {
  if (!CanRun()) return;
  auto [show, metrics] = Watch("e2e-user-counters-" + std::to_string(getpid()),
                               "[collectors.perf]\nin_probe = false\n");
  CHECK(MetricValue(metrics, R"(seqpoint_collector_windows_total{where="probe"})") == 0);
  CHECK(MetricValue(metrics, R"(seqpoint_collector_windows_total{where="user_space"})") > 0);
  const double median =
      MetricValue(metrics, R"(seqpoint_collector_start_offset_seconds{stat="p50"})");
  MESSAGE("user-space collectors started a median " << median * 1e6
                                                    << " us after the begin probe (log2 bound)");
  CHECK(median > 0);
}
