// Remote-write upload against a real Prometheus (--web.enable-remote-write-receiver), read back
// through its query API: live delivery, and an endpoint that is down for the whole run and comes
// back afterwards (every projection still arrives, from the on-disk spool).
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "agent/testing/prometheus_server.h"
#include "agent/testing/test_harness.h"
#include "agent/upload/remote_write_encode.h"

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

TEST_CASE(
    "agent upload: after an outage the spool drains within seconds of the endpoint's return") {
  if (!HavePrometheus()) {
    MESSAGE("skipped: prometheus not installed (scripts/setup.sh installs it)");
    return;
  }
  TempDir dir;
  const int port = FreePort();
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);  // the default backoff: 500 ms to 5 s
  cfg.upload_url = "http://127.0.0.1:" + std::to_string(port) + "/api/v1/write";
  cfg.upload_interval_s = 1;
  ReplaySpec spec;
  spec.exit_at_end = false;  // the run stays active: a batch is spooled every second
  spec.max_rows = 300;
  DaemonHarness h;
  REQUIRE(h.Start(cfg, ReplayParts(1, spec)).ok());
  // Down long enough for the retry delay to reach its cap (0.5 + 1 + 2 + 4 s, then 5 s).
  REQUIRE(WaitFor([&] {
    json s = Status(h);
    return s.is_object() && s["upload"]["backoff_ms"].get<int64_t>() >= 5000 &&
           s["upload"]["spool_batches"].get<int64_t>() >= 5;
  }));
  const int64_t queued = Status(h)["upload"]["spool_batches"].get<int64_t>();
  PrometheusServer prom(dir, port);
  REQUIRE(prom.WaitReady());
  const auto back = std::chrono::steady_clock::now();
  REQUIRE(WaitFor([&] {
    json s = Status(h);
    return s.is_object() && s["upload"]["sent_batches"].get<int64_t>() >= queued &&
           s["upload"]["spool_batches"].get<int64_t>() <= 1;  // the next second's may wait
  }));
  const double drain_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - back).count();
  MESSAGE("spool of " << queued << " batches drained " << drain_s
                      << " s after the endpoint was ready (upload.backoff_max_s = 5)");
  CHECK(drain_s < 15);  // the cap plus its jitter (6 s), and a loaded machine's slack
  json after = Status(h);
  CHECK(after["upload"]["backoff_ms"] == 0);
  CHECK(after["upload"]["dropped_batches"] == 0);
}

TEST_CASE("agent upload: a damaged spool is moved aside, counted, and no restart loop follows") {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.upload_url = "http://127.0.0.1:" + std::to_string(FreePort()) + "/api/v1/write";
  const std::string db = cfg.StateDbPath();
  std::filesystem::create_directories(cfg.state_dir);
  {
    // A spool of 60 unsent batches (4 KB each), written last: the file's tail is its pages.
    auto store = Store::Open(db);
    REQUIRE(store.ok());
    for (int i = 0; i < 60; ++i) {
      REQUIRE((*store)->SpoolPush(std::string(4000, 'a' + i % 26), 1, 1 << 30).ok());
    }
  }
  const auto size = std::filesystem::file_size(db);
  REQUIRE(size > 40 * 4096);
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 16 * 4096));
    std::string junk(8 * 4096, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto corrupt = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(cfg.state_dir)) {
      const std::string name = e.path().filename().string();
      n += name.rfind("state.db.corrupt-", 0) == 0 && name.find('-', 17) == std::string::npos;
    }
    return n;
  };
  for (int start = 0; start < 2; ++start) {
    CAPTURE(start);
    DaemonHarness h;
    REQUIRE(h.Start(cfg, ReplayParts(1, ReplaySpec{})).ok());
    // The daemon runs: the damaged file kept aside with its time, a fresh spool in its place.
    json s = Status(h);
    REQUIRE(s.is_object());
    CHECK(s["upload"]["spool_batches"].get<int64_t>() < 60);
    CHECK(corrupt() == 1);  // once: the second start finds a sound file and moves nothing
    HttpResult m = HttpGet("127.0.0.1", h.metrics_port(), "/metrics");
    CHECK(m.body.find(std::string("seqpoint_store_recoveries_total{reason=\"damaged\"} ") +
                      (start == 0 ? "1" : "0")) != std::string::npos);
    h.Stop();
  }
}
