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

bool CanRun() { return CanRunProbes() && access(Workload().c_str(), X_OK) == 0; }

// The value of the exposition line that starts with `series` ("name{labels}"); -1 if none.
double MetricValue(const std::string& metrics, const std::string& series) {
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// `seqpoint status` as a user reads it, from the daemon whose state is in `dir`.
std::string StatusText(const TempDir& dir) {
  const std::string cmd = "SEQPOINT_CONTROL_SOCKET='" + dir.path() + "/run/control.sock' '" +
                          BinaryDir() + "/agent/cli/seqpoint' status 2>&1";
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    pclose(f);
  }
  return out;
}

struct Watched {
  json show;
  std::string metrics;
  json status;              // `status` (JSON) at the end
  std::string status_text;  // `seqpoint status`
};

// Runs the workload under a daemon with `toml`; returns its run's `show`, the daemon's /metrics
// and its status at the end.
Watched Watch(const std::string& key, const std::string& toml) {
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
  return {show, d.Metrics(), d.Request("status"), StatusText(dir)};
}

}  // namespace

TEST_CASE("probe counters e2e: measured iterations get their perf counters from the probes") {
  if (!CanRun()) return;
  auto [show, metrics, status, text] = Watch("e2e-probe-counters-" + std::to_string(getpid()), "");
  const double probe = MetricValue(metrics, R"(seqpoint_collector_windows_total{where="probe"})");
  const double user =
      MetricValue(metrics, R"(seqpoint_collector_windows_total{where="user_space"})");
  const uint64_t measured = show["projections"]["perf:task-clock"]["measured"];
  MESSAGE("windows at the probes " << probe << ", from user space " << user << "; task-clock "
                                   << "measured on " << measured << " iterations");
  CHECK(probe >= static_cast<double>(measured));
  CHECK(show["projections"].contains("perf:context-switches"));
  // The path in force is said, and what the probes made of their windows is exported: every
  // window the daemon took from the probes was read at both probes; flagged ones are counted.
  const json& c = status["source"]["counters"];
  CHECK(c["path"] == "in-kernel sched_switch counting");
  CHECK(c["why"] == "");
  CHECK(MetricValue(metrics, R"(seqpoint_probe_counting_path{path="kernel"})") == 1);
  CHECK(MetricValue(metrics, R"(seqpoint_probe_counting_path{path="user"})") == 0);
  const double read =
      MetricValue(metrics, R"(seqpoint_probe_counting_windows_total{outcome="read"})");
  const double flagged =
      MetricValue(metrics, R"(seqpoint_probe_counting_windows_total{outcome="flagged"})");
  MESSAGE("probe counter windows: " << read << " read, " << flagged << " flagged; status: " << c);
  CHECK(read >= probe);
  CHECK(flagged >= 0);
  CHECK(flagged <= read);
  CHECK(c["windows"].get<double>() >= read);  // read later than /metrics
  CHECK(text.find("counters  in-kernel sched_switch counting") != std::string::npos);
}

TEST_CASE("probe counters e2e: with in_probe off the perf collector counts from user space") {
  if (!CanRun()) return;
  auto [show, metrics, status, text] = Watch("e2e-user-counters-" + std::to_string(getpid()),
                                             "[collectors.perf]\nin_probe = false\n");
  // Said plainly, with the reason, in status and on /metrics.
  CHECK(status["source"]["counters"]["path"] == "user-space perf collector");
  CHECK(status["source"]["counters"]["why"] == "collectors.perf.in_probe is off");
  CHECK(text.find("counters  user-space perf collector: collectors.perf.in_probe is off") !=
        std::string::npos);
  CHECK(MetricValue(metrics, R"(seqpoint_probe_counting_path{path="user"})") == 1);
  CHECK(MetricValue(metrics, R"(seqpoint_probe_counting_windows_total{outcome="read"})") == 0);
  CHECK(MetricValue(metrics, R"(seqpoint_collector_windows_total{where="probe"})") == 0);
  CHECK(MetricValue(metrics, R"(seqpoint_collector_windows_total{where="user_space"})") > 0);
  const double median =
      MetricValue(metrics, R"(seqpoint_collector_start_offset_seconds{stat="p50"})");
  MESSAGE("user-space collectors started a median " << median * 1e6
                                                    << " us after the begin probe (log2 bound)");
  CHECK(median > 0);
}
