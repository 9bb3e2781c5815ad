// `seqpoint probe` end to end: real probes, real processes, and the traces it writes read back
// with the project's trace reader (what `seqpoint select` reads).
#include "probes/tool/probe_tool.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "probes/iteration_probe_skeleton.h"
#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"
#include "common/trace_csv.h"

namespace seqpoint::probes {
namespace {

namespace fs = std::filesystem;
using testing::ChildProcess;
using testing::TestProgram;

fs::path TempDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / (name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("probe tool: output pattern rules") {
  ProbeToolOptions o;
  o.pid = 5;
  CHECK(*ResolveOutputPattern(o) == "-");
  o.pid = 0;
  o.all = true;
  CHECK(*ResolveOutputPattern(o) == "seqpoint-trace.{pid}.csv");
  o.out = "/tmp/run.csv";
  CHECK(*ResolveOutputPattern(o) == "/tmp/run.{pid}.csv");
  o.out = "/tmp/dir.d/run";
  CHECK(*ResolveOutputPattern(o) == "/tmp/dir.d/run.{pid}");
  o.out = "-";
  CHECK(ResolveOutputPattern(o).status().message().find("one trace per process") !=
        std::string::npos);
  ProbeToolOptions neither;
  CHECK(RunProbeTool(neither).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("probe tool: --pid writes a trace that the trace reader loads, until the process exits") {
  if (!testing::CanUseBpf()) return;
  fs::path dir = TempDir("seqpoint-probe-pid");
  auto child = ChildProcess::Start({TestProgram("usdt_workload"), "--wait", "--iters", "40",
                                    "--seq-lens", "8,0,24", "--skip-end", "2"});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  ProbeToolOptions options;
  options.pid = child->pid();
  options.out = (dir / "trace.csv").string();
  // Started once attached: iterations before the attach would be missed, and an attach can take
  // a second on a loaded machine.
  options.on_attach = [&](int) { (void)child->WriteLine("go"); };
  Status s = RunProbeTool(options);  // returns when the process exits
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(child->Wait().ok());
  auto trace = LoadTrace(options.out);
  REQUIRE_MESSAGE(trace.ok(), trace.status().ToString());
  // 40 iterations: SL 0 at iter 1,4,7,..(13 of them) skipped; iter 2 abandoned (row, no time).
  CHECK(trace->rows() == 27);
  CHECK(trace->schema.has_batch);
  CHECK(trace->schema.has_tokens);
  int time_col = trace->MetricIndex("time_ns");
  REQUIRE(time_col >= 0);
  for (size_t i = 0; i < trace->rows(); ++i) {
    CHECK(trace->seq_len[i] == (trace->iter[i] % 3 == 0 ? 8u : 24u));
    CHECK(trace->tokens[i] == trace->seq_len[i] * 4u);
    bool has_time = !std::isnan(trace->metrics[time_col][i]);
    CHECK(has_time == (trace->iter[i] != 2));
  }
  std::string text = ReadAll(options.out);
  CHECK(text.find("# skipped: 13 x seq_len 0") != std::string::npos);
  CHECK(text.find("1 without time_ns") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("probe tool: --pid of a process without the provider fails with the reason") {
  if (!testing::CanUseBpf()) return;
  auto child = ChildProcess::Start({TestProgram("plain_workload")});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  ProbeToolOptions options;
  options.pid = child->pid();
  options.out = "/dev/null";
  Status s = RunProbeTool(options);
  CHECK(s.code() == ErrorCode::kNotFound);
  CHECK(s.message().find("carries no seqpoint USDT provider") != std::string::npos);
  REQUIRE(child->WriteLine("go").ok());
  REQUIRE(child->Wait().ok());
}

TEST_CASE("probe tool: --pid --wait follows a process until it loads the provider (Python)") {
  if (!testing::CanUseBpf()) return;
  fs::path dir = TempDir("seqpoint-probe-wait");
  const char* script =
      "import sys\n"
      "print('ready', flush=True)\n"
      "sys.stdin.readline()\n"
      "import seqpoint_probe\n"  // dlopens libseqpoint_usdt.so only now
      "import time\n"
      "sys.stdin.readline()\n"  // the tool attached on the ld.so event
      "for i in range(20):\n"
      "    with seqpoint_probe.iteration(seq_len=3 + i):\n"
      "        time.sleep(0.001)\n";
  auto child = ChildProcess::Start({"/usr/bin/python3", "-c", script},
                                   {"PYTHONPATH=" + testing::BuildPath("sdk/python")});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  ProbeToolOptions options;
  options.pid = child->pid();
  options.wait = true;
  options.out = (dir / "py.csv").string();
  options.on_ready = [&] { (void)child->WriteLine("go"); };        // waiting: load the library
  options.on_attach = [&](int) { (void)child->WriteLine("go"); };  // attached: iterate
  Status s = RunProbeTool(options);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(child->Wait().ok());
  auto trace = LoadTrace(options.out);
  REQUIRE_MESSAGE(trace.ok(), trace.status().ToString());
  REQUIRE(trace->rows() == 20);
  for (size_t i = 0; i < trace->rows(); ++i) CHECK(trace->seq_len[i] == 3 + trace->iter[i]);
  fs::remove_all(dir);
}

TEST_CASE("probe tool: --pid --wait on a process that exits first ends with the reason") {
  if (!testing::CanUseBpf()) return;
  auto child = ChildProcess::Start({TestProgram("plain_workload")});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  ProbeToolOptions options;
  options.pid = child->pid();
  options.wait = true;
  options.out = "/dev/null";
  options.on_ready = [&] { (void)child->WriteLine("go"); };  // waiting: now it may exit
  Status s = RunProbeTool(options);
  (void)child->Wait();
  CHECK(s.code() == ErrorCode::kNotFound);
  CHECK(s.message().find("never carried the seqpoint provider") != std::string::npos);
}

TEST_CASE("probe tool: --all traces every new process, one file each, for --duration") {
  if (!testing::CanUseBpf()) return;
  fs::path dir = TempDir("seqpoint-probe-all");
  ProbeToolOptions options;
  options.all = true;
  options.duration_s = 2.0;
  options.out = (dir / "run.csv").string();
  std::vector<ChildProcess> ranks;
  std::thread spawner([&] {
    usleep(500000);  // started after the tool: found through the exec tracepoint
    for (int r = 0; r < 3; ++r) {
      auto c = ChildProcess::Start(
          {TestProgram("usdt_workload"), "--loop", "--seq-lens", std::to_string(30 + r)});
      if (c.ok()) ranks.push_back(std::move(*c));
    }
  });
  Status s = RunProbeTool(options);
  spawner.join();
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(ranks.size() == 3);
  for (size_t r = 0; r < ranks.size(); ++r) {
    fs::path file = dir / ("run." + std::to_string(ranks[r].pid()) + ".csv");
    REQUIRE(fs::exists(file));
    auto trace = LoadTrace(file.string());
    REQUIRE_MESSAGE(trace.ok(), trace.status().ToString());
    CHECK(trace->rows() > 0);
    for (uint32_t sl : trace->seq_len) CHECK(sl == 30 + r);
    REQUIRE(ranks[r].WriteLine("stop").ok());
    REQUIRE(ranks[r].Wait().ok());
  }
  fs::remove_all(dir);
}

TEST_CASE("probe tool: the CLI killed with SIGKILL leaves no probe attached") {
  if (!testing::CanUseBpf()) return;
  auto workload = ChildProcess::Start({TestProgram("usdt_workload"), "--loop"});
  REQUIRE(workload.ok());
  std::string cli = testing::BuildPath("agent/cli/seqpoint");
  if (access(cli.c_str(), X_OK) != 0) {
    MESSAGE("SKIP: " << cli << " is not built");
    return;
  }
  auto before = LoadedSeqpointProgramIds();
  REQUIRE(before.ok());
  auto probe = ChildProcess::Start(
      {cli, "probe", "--pid", std::to_string(workload->pid()), "--out", "/dev/null"});
  REQUIRE(probe.ok());
  // Its programs: ours that were not loaded before it started (another agent on this machine
  // may have its own).
  std::set<uint32_t> its;
  REQUIRE(testing::PollUntil([] { usleep(20000); },
                             [&] {
                               auto now = LoadedSeqpointProgramIds();
                               its.clear();
                               if (now.ok()) {
                                 for (uint32_t id : *now) {
                                   if (before->count(id) == 0) its.insert(id);
                                 }
                               }
                               return its.size() >=
                                      7;  // 4 iteration programs + 3 process-watch programs
                             }));
  probe->Kill();
  REQUIRE(probe->Wait().ok());
  CHECK(testing::PollUntil([] { usleep(20000); },
                           [&] {
                             auto now = LoadedSeqpointProgramIds();
                             if (!now.ok()) return false;
                             for (uint32_t id : its) {
                               if (now->count(id) > 0) return false;
                             }
                             return true;
                           },
                           10000));
  REQUIRE(workload->WriteLine("stop").ok());
  CHECK(*workload->Wait() == 0);  // the traced process never noticed
}

}  // namespace
}  // namespace seqpoint::probes
