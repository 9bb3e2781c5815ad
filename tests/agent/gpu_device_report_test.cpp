// Which GPU each measured value came from, through the whole daemon (issue 20 item 1): the real
// NVML collector on the NVML test double replaying a recorded node (collectors/gpu/testdata/
// node5.nvidia-smi.xml: GPU 0 a Tesla T4, GPU 1 an RTX 3080), measuring a replayed process that
// holds both GPUs, per process as seqpointd does. The UUID of each value's GPU travels from the
// collector's sample through the run's measurements and the store to `seqpoint show --json`,
// `seqpoint report` (JSON, text and HTML) and bench/gpu/prove_report.py's "measured on" line; the
// run names both GPUs.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include "agent/cli/report_html.h"
#include "agent/source/trace_replay_source.h"
#include "agent/testing/test_harness.h"
#include "collectors/nvml/nvml_collector.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

#ifndef SEQPOINT_FAKE_NVML_PATH
#define SEQPOINT_FAKE_NVML_PATH ""  // the NVML double is not built here: the case skips
#endif

namespace {

constexpr const char* kT4 = "GPU-d37e67a5-91dd-3774-a5cb-99096249601a";
constexpr const char* kRtx3080 = "GPU-19d6d965-2acc-f646-00f8-4c76979aabb4";
constexpr pid_t kReplayPid = 1000000;  // MakeDaemonParts numbers replayed processes from here

// The real NVML collector, per process as the daemon runs it: it finds the process's GPUs in
// NVML's process list (the double lists the replayed process on GPUs 0 and 1: FAKE_NVML_EXTRA).
// Named apart from "nvml": a replay has no CUDA sync probes, under which the GPU window rule
// (collectors/gpu/sync_window.h, tested in agent/measure/gpu_sync_window_test.cpp) would leave
// every window out; here the values are read at the window's end, which is all this test needs.
class NvmlOfProcess : public seqpoint::collectors::Collector {
 public:
  std::string_view name() const override { return "nvml-of-process"; }
  seqpoint::Status Open(const seqpoint::collectors::Target& t) override { return inner_.Open(t); }
  seqpoint::Status Begin() override { return inner_.Begin(); }
  seqpoint::Result<std::vector<seqpoint::collectors::Sample>> End() override {
    return inner_.End();
  }
  void Close() override { inner_.Close(); }

 private:
  seqpoint::collectors::NvmlCollector inner_{[] {
    seqpoint::collectors::NvmlOptions o;
    o.library = SEQPOINT_FAKE_NVML_PATH;
    return o;
  }()};
};

DaemonParts OneProcessOnTwoGpus() {
  ReplaySpec spec;
  spec.traces = {RecordedTrace() + "@job-gpu"};
  spec.max_rows = 400;  // the process exits after it: the run closes and is read from the store
  DaemonParts parts = MakeDaemonParts(spec);
  parts.collectors = [](const DaemonConfig&, IterationSource* source) -> CollectorSetFactory {
    auto* replay = static_cast<TraceReplaySource*>(source);
    return [replay] {
      std::vector<std::unique_ptr<seqpoint::collectors::Collector>> v;
      v.push_back(std::make_unique<ReplayCollector>(replay));
      v.push_back(std::make_unique<NvmlOfProcess>());
      return v;
    };
  };
  return parts;
}

}  // namespace

TEST_CASE("agent GPU devices: a run on two GPUs names each value's GPU by UUID, end to end") {
  if (std::string(SEQPOINT_FAKE_NVML_PATH).empty()) {
    std::fprintf(stderr, "SKIP: the NVML test double (seqpoint_fake_nvml) is not built here\n");
    return;
  }
  // The double reads these at its first nvmlInit_v2 (this process's first NVML collector): the
  // recorded node, and the replayed process holding memory on its GPUs 0 and 1.
  const std::string pid = std::to_string(kReplayPid);
  REQUIRE(setenv("FAKE_NVML_EXTRA", ("0:" + pid + ":1024;1:" + pid + ":2048").c_str(), 1) == 0);
  REQUIRE(setenv("FAKE_NVML_XML",
                 (SourceDir() + "/collectors/gpu/testdata/node5.nvidia-smi.xml").c_str(), 1) == 0);
  TempDir dir;
  DaemonHarness h;
  REQUIRE(h.Start(DaemonHarness::TestConfig(dir), OneProcessOnTwoGpus()).ok());
  json show;
  REQUIRE(WaitFor([&] {
    auto s = h.Show("job-gpu");
    if (!s.ok() || (*s)["run"]["state"] == "active") return false;
    show = *s;
    return true;
  }));
  ControlRequest rq;
  rq.cmd = "report";
  rq.run = "job-gpu";
  auto report = h.Request(rq);
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());

  // show --json: both GPUs, by UUID, with the collector that read them.
  REQUIRE(show["devices"].is_array());
  std::map<std::string, json> devices;
  for (const json& d : show["devices"]) devices[d["device"].get<std::string>()] = d;
  MESSAGE("devices: ", show["devices"].dump());
  REQUIRE(devices.count(kT4));
  REQUIRE(devices.count(kRtx3080));
  CHECK(devices[kT4]["collectors"] == json::array({"nvml"}));
  CHECK(devices[kT4]["iterations"].get<uint64_t>() > 0);
  CHECK(devices[kRtx3080]["iterations"].get<uint64_t>() > 0);
  CHECK(show["devices_not_recorded"] == 0);

  // report --json: every NVML value names its GPU (the process's memory on a GPU included); a
  // process's own values (time, the replayed CPU counters) name none.
  std::map<std::string, std::set<std::string>> devices_of;  // metric -> the devices its rows name
  for (const json& m : (*report)["measurements"]) {
    devices_of[m["metric"].get<std::string>()].insert(m["device"].get<std::string>());
  }
  size_t nvml_metrics = 0;
  for (const auto& [metric, named] : devices_of) {
    INFO(metric);
    if (metric.rfind("nvml:", 0) != 0) {
      if (metric == "time_ns" || metric == "task_clock_ns")
        CHECK(named == std::set<std::string>{""});
      continue;
    }
    ++nvml_metrics;
    const std::string gpu = metric.rfind("nvml:gpu0:", 0) == 0 ? kT4 : kRtx3080;
    CHECK(named == std::set<std::string>{gpu});
  }
  CHECK(nvml_metrics >= 8);

  // `seqpoint show` and `seqpoint report` as a user reads them.
  const std::string cli = BinaryDir() + "/agent/cli/seqpoint";
  const std::string text_path = dir.File("report.txt");
  REQUIRE(std::system((cli + " report job-gpu --socket " + h.socket() + " > " + text_path + " 2>&1")
                          .c_str()) == 0);
  const std::string text = ReadFile(text_path);
  MESSAGE(text.substr(0, 600));
  const size_t line = text.find("measured on ");
  REQUIRE(line != std::string::npos);
  const std::string measured_on = text.substr(line, text.find('\n', line) - line);
  CHECK(measured_on.find(kT4) != std::string::npos);
  CHECK(measured_on.find(kRtx3080) != std::string::npos);

  // report --html: the "Measured on" section names both.
  const std::string html = seqpoint::cli::RenderReportHtml(*report, "node5");
  CHECK(html.find("<h2>Measured on</h2>") != std::string::npos);
  CHECK(html.find(kT4) != std::string::npos);
  CHECK(html.find(kRtx3080) != std::string::npos);

  // bench/gpu/prove_report.py, as prove.sh runs it, on these answers: its "measured on" line.
  {
    std::ofstream(dir.File("show.json")) << show.dump();
    std::ofstream(dir.File("report.json")) << report->dump();
    std::ofstream csv(dir.File("trainer.csv"));
    csv << "iter,seq_len,wall_ns,cuda_ms,phase_energy_mj,gpu_uuid\n0,12,1000000,1.0,," << kT4
        << "\n";
  }
  const std::string py_out = dir.File("prove.txt");
  REQUIRE(std::system(("/usr/bin/python3 " + SourceDir() + "/bench/gpu/prove_report.py test " +
                       dir.File("trainer.csv") + " " + dir.File("show.json") + " " +
                       dir.File("report.json") + " > " + py_out + " 2>&1")
                          .c_str()) == 0);
  const std::string proved = ReadFile(py_out);
  MESSAGE(proved);
  const size_t gpu = proved.find("GPU: trainer on ");
  REQUIRE(gpu != std::string::npos);
  const std::string gpu_line = proved.substr(gpu, proved.find('\n', gpu) - gpu);
  CHECK(gpu_line.find(std::string("agent measured ")) != std::string::npos);
  CHECK(gpu_line.find(kT4) != std::string::npos);
  CHECK(gpu_line.find(kRtx3080) != std::string::npos);
  CHECK(gpu_line.find("no device") == std::string::npos);
}
