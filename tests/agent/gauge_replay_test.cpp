// Gauges as gauges, through the whole daemon (issue 19 item 2, issue 20 item 2): the recorded
// trace replayed with GPU columns as NVML names them (gpu_trace.h: the memory column is a model
// on the real trace's SLs, no GPU being lent here). The replay source gives the columns their
// kinds as the collectors do (collectors::InferScopeAndKind), so the memory is a time-weighted
// mean with a peak, never a sum; and `seqpoint show` says at which SL the job would run out of
// the GPU's 16 GiB.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>

#include "agent/testing/test_harness.h"
#include "tests/agent/gpu_trace.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

constexpr double kGiB = kGpuTraceGiB;
constexpr double kCapacity = 16 * kGiB;

double Memory(uint32_t seq_len, size_t row) { return GpuTraceMemory(seq_len, row); }

}  // namespace

TEST_CASE(
    "agent gauges: a replayed GPU memory column is a mean and peak per SL bin, with the SL that "
    "would exceed the GPU") {
  TempDir dir;
  const GpuTrace trace = WriteGpuTrace(dir.File("gru_gpu.csv"), kCapacity);
  const double truth = trace.time_weighted_mean, max_sl = trace.max_sl;
  ReplaySpec spec;
  spec.traces.push_back(trace.path + "@job-gpu");
  spec.exit_at_end = false;  // active: /metrics exports it
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  DaemonHarness h;
  REQUIRE(h.Start(cfg, MakeDaemonParts(spec)).ok());
  json show;
  REQUIRE(WaitFor([&] {
    auto s = h.Show("job-gpu");
    if (!s.ok() || (*s)["run"]["iterations"] != 1500) return false;
    show = *s;
    return true;
  }));
  // Never a whole-run total.
  CHECK_FALSE(show["projections"].contains("nvml:gpu0:proc_mem_used"));
  CHECK_FALSE(show["projections"].contains("nvml:gpu0:mem_total"));
  REQUIRE(show["gauges"].contains("nvml:gpu0:proc_mem_used"));
  const json& g = show["gauges"]["nvml:gpu0:proc_mem_used"];
  CHECK(g["unit"] == "bytes");
  const double mean = g["mean"].get<double>();
  MESSAGE("GPU memory: time-weighted mean ", mean / kGiB, " GiB against ", truth / kGiB,
          " GiB over every iteration (", (mean - truth) / truth * 100, "%), peak ",
          g["peak"].get<double>() / kGiB, " GiB, ", g["measured"].get<uint64_t>(), " measured");
  CHECK(std::fabs(mean - truth) / truth < 0.05);
  CHECK(g["peak"].get<double>() <= Memory(static_cast<uint32_t>(max_sl), 0) * 1.011);
  CHECK(g["peak"].get<double>() >= mean);
  REQUIRE(g["bins"].size() >= 3);
  for (const json& b : g["bins"]) {
    CHECK(b["peak"].get<double>() >= b["mean"].get<double>() * (1 - 1e-12));  // one sample: equal
    CHECK(b["peak_seq_len"].get<uint32_t>() >= b["bin"][0].get<uint32_t>());
    CHECK(b["peak_seq_len"].get<uint32_t>() <= b["bin"][1].get<uint32_t>());
  }
  CHECK(show["gauges"]["nvml:gpu0:mem_total"]["peak"].get<double>() == kCapacity);
  // The SL at which 2 GiB + 96 MiB x SL reaches 16 GiB: 149.3.
  REQUIRE(show["gpu_memory"].size() == 1);
  const json& m = show["gpu_memory"][0];
  CHECK(m["scope"] == "process");
  CHECK(m["capacity_bytes"].get<double>() == kCapacity);
  REQUIRE(m["fit"]["supported"].get<bool>());
  const double exceed = m["fit"]["exceed_seq_len"].get<double>();
  MESSAGE("would exceed 16 GiB at SL ", exceed, " (model: 149.3)");
  CHECK(exceed == doctest::Approx(14 * 1024.0 / 96).epsilon(0.05));

  // /metrics: the mean and the peak as gauges, nothing in the projection family.
  HttpResult r = HttpGet("127.0.0.1", h.metrics_port(), "/metrics");
  REQUIRE(r.error.empty());
  CHECK(r.body.find("seqpoint_run_gauge_mean{run=\"1\",metric=\"nvml:gpu0:proc_mem_used\"") !=
        std::string::npos);
  CHECK(r.body.find("seqpoint_run_gauge_peak{") != std::string::npos);
  CHECK(r.body.find("seqpoint_run_gpu_memory_exceed_seq_len{") != std::string::npos);
  CHECK(r.body.find("seqpoint_run_projection{run=\"1\",metric=\"nvml:gpu0:proc_mem_used\"") ==
        std::string::npos);

  // `seqpoint show`, as a user reads it: the gauge with its unit, and the memory outlook.
  const std::string out_path = dir.File("show.txt");
  const std::string cmd = BinaryDir() + "/agent/cli/seqpoint show job-gpu --socket " + h.socket() +
                          " > " + out_path + " 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string text = ReadFile(out_path);
  MESSAGE(text);
  CHECK(text.find("Gauges: time-weighted mean") != std::string::npos);
  CHECK(text.find("GiB") != std::string::npos);
  CHECK(text.find("would exceed 16 GiB at SL ~") != std::string::npos);
}

TEST_CASE("agent gauges: a replayed trace without the GPU capacity: show says it is not reported") {
  TempDir dir;
  // Only the process's memory: a driver that gave no total.
  const std::string path = WriteGpuTrace(dir.File("gru_mem.csv"), 0).path;
  ReplaySpec spec;
  spec.traces.push_back(path + "@job-mem");
  spec.exit_at_end = false;
  spec.max_rows = 600;
  DaemonHarness h;
  REQUIRE(h.Start(DaemonHarness::TestConfig(dir), MakeDaemonParts(spec)).ok());
  json show;
  REQUIRE(WaitFor([&] {
    auto s = h.Show("job-mem");
    if (!s.ok() || (*s)["run"]["iterations"] != 600) return false;
    show = *s;
    return true;
  }));
  REQUIRE(show["gpu_memory"].size() == 1);
  const json& m = show["gpu_memory"][0];
  CHECK(m["capacity_bytes"].is_null());
  CHECK_FALSE(m["fit"]["supported"].get<bool>());
  CHECK(m["fit"]["why"].get<std::string>().find("capacity is not reported") != std::string::npos);
}

TEST_CASE("agent gauges: a replayed run closed and read back from the store keeps its gauges") {
  TempDir dir;
  ReplaySpec spec;
  spec.traces.push_back(WriteGpuTrace(dir.File("gru_gpu.csv"), kCapacity).path + "@job-closed");
  spec.max_rows = 800;  // exits at the end: the run closes and is stored
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  json live;
  {
    DaemonHarness h;
    REQUIRE(h.Start(cfg, MakeDaemonParts(spec)).ok());
    REQUIRE(WaitFor([&] {
      auto s = h.Show("job-closed");
      if (!s.ok() || (*s)["run"]["state"] == "active") return false;
      live = *s;
      return true;
    }));
  }
  // A new daemon on the same state: the run comes from the store alone.
  ReplaySpec none;
  DaemonHarness h2;
  REQUIRE(h2.Start(cfg, MakeDaemonParts(none)).ok());
  auto stored = h2.Show("job-closed");
  REQUIRE(stored.ok());
  CHECK_FALSE((*stored)["projections"].contains("nvml:gpu0:proc_mem_used"));
  REQUIRE((*stored)["gauges"].contains("nvml:gpu0:proc_mem_used"));
  const json& g = (*stored)["gauges"]["nvml:gpu0:proc_mem_used"];
  const json& l = live["gauges"]["nvml:gpu0:proc_mem_used"];
  CHECK(g["mean"].get<double>() == doctest::Approx(l["mean"].get<double>()));
  CHECK(g["peak"].get<double>() == l["peak"].get<double>());
  CHECK(g["bins"].size() == l["bins"].size());
  REQUIRE((*stored)["gpu_memory"].size() == 1);
  CHECK((*stored)["gpu_memory"][0]["fit"]["supported"] ==
        live["gpu_memory"][0]["fit"]["supported"]);
}
