// /metrics: served over HTTP, and clean under `promtool check metrics` (the real Prometheus
// linter), with runs, collectors and upload families present.
#include <doctest/doctest.h>

#include <cstdio>

#include "agent/metrics/metric_family.h"
#include "agent/testing/test_harness.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;

namespace {

// Runs `promtool check metrics` on `text`; returns its exit status and output.
std::pair<int, std::string> Promtool(const TempDir& dir, const std::string& text) {
  std::string in = dir.Write("metrics.txt", text);
  std::string cmd = "promtool check metrics < '" + in + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

bool HavePromtool() { return std::system("command -v promtool > /dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("agent metrics: exposition escaping") {
  MetricFamily f{"x_total", "counter", "help with \\ and\nnewline", {}};
  f.Add({{"k", "a\"b\\c\nd"}}, 1.5);
  std::string text = RenderExposition({f});
  CHECK(text.find("# HELP x_total help with \\\\ and\\nnewline") != std::string::npos);
  CHECK(text.find("x_total{k=\"a\\\"b\\\\c\\nd\"} 1.5") != std::string::npos);
  CHECK(ToBaseUnit("time_ns", "ns").name == "time_seconds");
  CHECK(ToBaseUnit("energy_uj", "uJ").name == "energy_joules");
}

TEST_CASE("agent metrics: /metrics during and after a run passes promtool check metrics") {
  if (!HavePromtool()) {
    MESSAGE("skipped: promtool not installed (scripts/setup.sh installs prometheus)");
    return;
  }
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.upload_url = "http://127.0.0.1:" + std::to_string(FreePort()) + "/api/v1/write";
  ReplaySpec spec;
  spec.exit_at_end = false;  // the run stays active, so its families are exported
  spec.max_rows = 500;
  DaemonHarness h;
  REQUIRE(h.Start(cfg, ReplayParts(2, spec)).ok());
  REQUIRE(WaitFor([&] {
    auto s = h.Show("job-1");
    return s.ok() && (*s)["run"]["iterations"] == 500;
  }));
  HttpResult r = HttpGet("127.0.0.1", h.metrics_port(), "/metrics");
  REQUIRE_MESSAGE(r.error.empty(), r.error);
  CHECK(r.status == 200);
  for (const char* family :
       {"seqpoint_run_projection{", "seqpoint_run_projection_low{", "seqpoint_run_actual{",
        "seqpoint_run_self_check_error_ratio{", "seqpoint_run_observer_effect_ratio{",
        "seqpoint_run_observer_effect_flagged{", "seqpoint_collector_measurements_total{",
        "seqpoint_collector_cost_seconds_total{", "seqpoint_probe_lost_events_total{",
        "seqpoint_upload_spool_batches ", "seqpoint_agent_resident_memory_bytes "}) {
    CHECK_MESSAGE(r.body.find(family) != std::string::npos, family);
  }
  auto [status, out] = Promtool(dir, r.body);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.empty());
  CHECK(HttpGet("127.0.0.1", h.metrics_port(), "/nope").status == 404);
}
