// Remote-write upload against a real Prometheus (--web.enable-remote-write-receiver), read back
// through its query API: live delivery, and an endpoint that is down for the whole run and comes
// back afterwards (every projection still arrives, from the on-disk spool).
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>

#include "agent/testing/prometheus_server.h"
#include "agent/upload/remote_write_encode.h"
#include "agent/testing/test_harness.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

json Status(const DaemonHarness& h) {
  ControlRequest r;
  r.cmd = "status";
  auto s = h.Request(r);
  return s.ok() ? *s : json();
}

// Every projection `show` reports for the run is in Prometheus with the same final value.
void CheckEveryProjectionArrived(PrometheusServer& prom, const json& show) {
  const std::string run = std::to_string(show["run"]["id"].get<int64_t>());
  REQUIRE(!show["projections"].empty());
  for (const auto& [metric, p] : show["projections"].items()) {
    BaseUnit b = ToBaseUnit(metric, p["unit"].get<std::string>());
    for (const auto& [family, field] : {std::pair{"seqpoint_run_projection", "total"},
                                        std::pair{"seqpoint_run_projection_low", "low"},
                                        std::pair{"seqpoint_run_projection_high", "high"}}) {
      std::string q = std::string(family) + "{run=\"" + run + "\",metric=\"" + b.name + "\"}";
      json result = prom.Query(q);
      INFO(q);
      REQUIRE(result.size() == 1);
      double got = std::stod(result[0]["value"][1].get<std::string>());
      if (p[field].is_null()) {
        // A high end the samples cannot bound: +Inf in Prometheus, null in JSON.
        CHECK(std::isinf(got));
        CHECK_FALSE(p["bounded"].get<bool>());
        continue;
      }
      CHECK(got == doctest::Approx(p[field].get<double>() * b.scale).epsilon(1e-9));
    }
  }
}

}  // namespace

TEST_CASE("agent upload: remote-write encoding round-trips, labels sorted") {
  MetricFamily f{"seqpoint_run_projection", "gauge", "h", {}};
  f.Add({{"run", "1"}, {"metric", "time_seconds"}}, 12.5);
  f.Add({{"run", "2"}, {"metric", "time_seconds"}}, 7);
  auto batches = EncodeRemoteWrite({f}, {{"instance", "n1"}, {"run", "ignored"}}, 1700000000000, 1);
  REQUIRE(batches.size() == 2);
  auto decoded = DecodeRemoteWrite(batches[0].payload);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->size() == 1);
  const Labels& l = (*decoded)[0].labels;
  CHECK(l == Labels{{"__name__", "seqpoint_run_projection"},
                    {"instance", "n1"},
                    {"metric", "time_seconds"},
                    {"run", "1"}});
  CHECK((*decoded)[0].value == 12.5);
  CHECK((*decoded)[0].timestamp_ms == 1700000000000);
  CHECK(!DecodeRemoteWrite("garbage").ok());
}

TEST_CASE("agent upload: projections reach a real Prometheus through remote-write") {
  if (!HavePrometheus()) {
    MESSAGE("skipped: prometheus not installed (scripts/setup.sh installs it)");
    return;
  }
  TempDir dir;
  PrometheusServer prom(dir, FreePort());
  REQUIRE(prom.WaitReady());
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.upload_url = "http://127.0.0.1:" + std::to_string(prom.port()) + "/api/v1/write";
  cfg.upload_interval_s = 1;
  cfg.upload_labels = {{"cluster", "test"}};
  ReplaySpec spec;
  spec.step_delay_us = 20000;
  DaemonHarness h;
  REQUIRE(h.Start(cfg, ReplayParts(1, spec)).ok());
  REQUIRE(WaitFor([&] {
    auto runs = h.Runs(true);
    return runs.ok() && !(*runs)["runs"].empty() && (*runs)["runs"][0]["state"] == "finished";
  }));
  REQUIRE(WaitFor([&] {
    json s = Status(h);
    return s.is_object() && s["upload"]["spool_batches"] == 0 && s["upload"]["sent_batches"] > 0;
  }));
  auto show = h.Show("job-0");
  REQUIRE(show.ok());
  CheckEveryProjectionArrived(prom, *show);
  json labelled = prom.Query("seqpoint_run_iterations_total{cluster=\"test\"}");
  REQUIRE(labelled.size() == 1);
  CHECK(labelled[0]["metric"].contains("instance"));
  CHECK(labelled[0]["value"][1] == "1500");
}

TEST_CASE("agent upload: endpoint down for the whole run, then back: every projection arrives") {
  if (!HavePrometheus()) {
    MESSAGE("skipped: prometheus not installed (scripts/setup.sh installs it)");
    return;
  }
  TempDir dir;
  const int port = FreePort();
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.upload_url = "http://127.0.0.1:" + std::to_string(port) + "/api/v1/write";
  cfg.upload_interval_s = 1;
  cfg.upload_backoff_initial_ms = 100;
  cfg.upload_backoff_max_s = 1;
  ReplaySpec spec;
  spec.step_delay_us = 150000;
  DaemonHarness h;
  REQUIRE(h.Start(cfg, ReplayParts(1, spec)).ok());
  // The whole run happens while nothing listens on the endpoint. Once two batches wait in the
  // spool, samples older than `mid_run` exist that only the spool can deliver.
  REQUIRE(WaitFor([&] {
    json s = Status(h);
    return s.is_object() && s["upload"]["spool_batches"].get<int64_t>() >= 2;
  }));
  const double mid_run =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  REQUIRE(WaitFor([&] {
    auto runs = h.Runs(true);
    return runs.ok() && !(*runs)["runs"].empty() && (*runs)["runs"][0]["state"] == "finished";
  }));
  json during = Status(h);
  CHECK(during["upload"]["failures"].get<uint64_t>() > 0);
  CHECK(during["upload"]["sent_batches"] == 0);
  CHECK(during["upload"]["spool_batches"].get<int64_t>() > 1);
  // Then the endpoint comes back.
  PrometheusServer prom(dir, port);
  REQUIRE(prom.WaitReady());
  REQUIRE(WaitFor([&] {
    json s = Status(h);
    return s.is_object() && s["upload"]["spool_batches"] == 0;
  }));
  json after = Status(h);
  CHECK(after["upload"]["rejected_batches"] == 0);
  CHECK(after["upload"]["dropped_batches"] == 0);
  auto show = h.Show("job-0");
  REQUIRE(show.ok());
  CheckEveryProjectionArrived(prom, *show);
  // Samples taken during the outage arrived too, with their own timestamps.
  char at[32];
  std::snprintf(at, sizeof at, "%.3f", mid_run);
  json earlier = prom.Query("seqpoint_run_iterations_total", at);
  REQUIRE(earlier.size() == 1);
  CHECK(std::stod(earlier[0]["value"][1].get<std::string>()) < 1500);  // mid-run value
  json count = prom.Query("count_over_time(seqpoint_run_iterations_total[1h])");
  REQUIRE(count.size() == 1);
  CHECK(std::stoi(count[0]["value"][1].get<std::string>()) >= 3);
}
