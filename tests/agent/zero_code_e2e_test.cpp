// seqpointd with zero-code probes, end to end: the real binary, configured by its TOML file,
// attaches real uprobes to real programs that carry no USDT markers (probes/testing:
// mimic_workload calls libseqpoint_mimic_rnn.so; mimic_miopen_workload calls the same code built
// as libMIOpen.so with MIOpen's function names), and their runs show up on the control socket
// like USDT runs. Needs root (BPF); skips otherwise. The --check-config cases need nothing.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/testing/seqpointd_process.h"
#include "agent/testing/training_child.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

bool CanRun() {
  if (geteuid() != 0) {
    MESSAGE("skipped: the eBPF probes need root (CI runs as root)");
    return false;
  }
  return access(SeqpointdBinary().c_str(), X_OK) == 0;
}

std::string Program(const std::string& name) { return BinaryDir() + "/probes/testing/" + name; }

// The status entry of `pid` in source.attached once it is attached (null after the deadline).
json AttachedEntry(Seqpointd& d, pid_t pid) {
  json found;
  WaitFor([&] {
    json s = d.Request("status");
    if (!s.is_object() || !s["source"].is_object()) return false;
    for (const auto& a : s["source"]["attached"]) {
      if (a["pid"] == pid) found = a;
    }
    return !found.is_null();
  });
  return found;
}

std::map<uint32_t, uint64_t> Histogram(const json& show) {
  std::map<uint32_t, uint64_t> h;
  for (const auto& b : show["histogram"]) h[b["seq_len"]] = b["count"];
  return h;
}

bool HasRun(Seqpointd& d, const std::string& key) {
  json runs = d.Request("runs", true);
  for (const auto& r : runs["runs"]) {
    if (r["key"] == key) return true;
  }
  return false;
}

const char* kMimicGemm = R"([probes]
zero_code = []
[probes.zero_code_custom.mimic-gemm]
library = "libseqpoint_mimic_rnn.so"
function = "mimic_sgemm_"
arg = 3
deref = true
boundary_function = "mimicOptimizerStep"
)";

}  // namespace

TEST_CASE("agent zero-code: a custom probe from the config file finds an unmarked program") {
  if (!CanRun()) return;
  TempDir dir;
  std::string config = dir.Write("seqpointd.toml", kMimicGemm);
  Seqpointd d(dir, {"--config", config}, "seqpointd.log");
  REQUIRE(d.Ready());
  const std::string key = "zc-custom-" + std::to_string(getpid());
  TrainingChild w(key, {Program("mimic_workload"), "gemm", "200", "8,16,24,32", "--wait"},
                  QuietStdout());
  json entry = AttachedEntry(d, w.pid());
  REQUIRE_MESSAGE(!entry.is_null(), d.Log());
  CHECK(entry["probe"] == "zero-code mimic-gemm");
  CHECK(entry["detail"].get<std::string>().find("collectors start at its first SL call") !=
        std::string::npos);
  CHECK(entry["where"].get<std::string>().find("libseqpoint_mimic_rnn.so") != std::string::npos);
  CHECK(entry["run_started"] == false);  // attached, but no iteration yet: no run
  CHECK_FALSE(HasRun(d, key));
  w.SendLine("go\n");
  CHECK(WEXITSTATUS(w.Wait()) == 0);
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  CHECK(run["state"] == "finished");
  CHECK(run["iterations"] == 200);
  CHECK(run["unobserved"] == 0);
  json show = d.Show(key);
  REQUIRE(show.is_object());
  // SL = n of the iteration's first sgemm_ = SL x 4 (mimic_workload.c), 50 iterations each.
  CHECK(Histogram(show) == std::map<uint32_t, uint64_t>{{32, 50}, {64, 50}, {96, 50}, {128, 50}});
  size_t measured = 0;
  for (const auto& p : show["seqpoints"]) measured += p["iters"].size();
  CHECK(measured > 0);
  CHECK(show["projections"].contains("time_ns"));
}

TEST_CASE("agent zero-code: the miopen-rnn preset by name, on a library named like MIOpen's") {
  if (!CanRun() || access(Program("mimic_miopen_workload").c_str(), X_OK) != 0) return;
  TempDir dir;
  std::string config = dir.Write("seqpointd.toml", "[probes]\nzero_code = [\"miopen-rnn\"]\n");
  Seqpointd d(dir, {"--config", config}, "seqpointd.log");
  REQUIRE(d.Ready());
  const std::string idle_key = "zc-idle-" + std::to_string(getpid());
  const std::string key = "zc-miopen-" + std::to_string(getpid());
  {
    // Maps libMIOpen.so but never iterates (a non-RNN job): attached, never a run.
    TrainingChild idle(idle_key, {Program("mimic_miopen_workload"), "rnn", "5", "9", "--wait"},
                       QuietStdout());
    json e = AttachedEntry(d, idle.pid());
    REQUIRE_MESSAGE(!e.is_null(), d.Log());
    CHECK(e["probe"] == "zero-code miopen-rnn");
  }
  TrainingChild w(key, {Program("mimic_miopen_workload"), "rnn", "120", "5,40,7", "--wait"},
                  QuietStdout());
  REQUIRE_MESSAGE(!AttachedEntry(d, w.pid()).is_null(), d.Log());
  w.SendLine("go\n");
  CHECK(WEXITSTATUS(w.Wait()) == 0);
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  CHECK(run["state"] == "finished");
  CHECK(run["iterations"] == 120);
  // miopen-rnn: SL = the largest sequenceLen of the forward calls (the decoder's, SL + 3).
  CHECK(Histogram(d.Show(key)) == std::map<uint32_t, uint64_t>{{8, 40}, {10, 40}, {43, 40}});
  CHECK_FALSE(HasRun(d, idle_key));
}

TEST_CASE("agent zero-code: SL calls after the last boundary are not a crash at exit") {
  if (!CanRun()) return;
  TempDir dir;
  // Boundary at the forward call, SL at the backward calls: every iteration ends with SL calls
  // that no boundary closes, like evaluation GEMMs after the last optimizer step.
  std::string config = dir.Write("seqpointd.toml", R"([probes]
zero_code = []
[probes.zero_code_custom.backward-first]
library = "libseqpoint_mimic_rnn.so"
function = "mimicRNNBackwardWeights"
arg = 2
boundary_function = "mimicRNNForwardTraining"
)");
  Seqpointd d(dir, {"--config", config}, "seqpointd.log");
  REQUIRE(d.Ready());
  const std::string key = "zc-open-" + std::to_string(getpid());
  TrainingChild w(key, {Program("mimic_workload"), "rnn", "30", "6", "--wait"}, QuietStdout());
  REQUIRE_MESSAGE(!AttachedEntry(d, w.pid()).is_null(), d.Log());
  w.SendLine("go\n");
  CHECK(WEXITSTATUS(w.Wait()) == 0);
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  CHECK(run["state"] == "finished");
  CHECK(run["iterations"] == 29);  // the 30th never reached a boundary
  CHECK(Histogram(d.Show(key)) == std::map<uint32_t, uint64_t>{{9, 29}});
}

TEST_CASE("agent zero-code: a process with the USDT provider is counted by USDT only") {
  if (!CanRun()) return;
  TempDir dir;
  std::string config = dir.Write("seqpointd.toml", kMimicGemm);
  Seqpointd d(dir, {"--config", config}, "seqpointd.log");
  REQUIRE(d.Ready());
  const std::string key = "zc-usdt-" + std::to_string(getpid());
  TrainingChild w(key, {Program("usdt_workload"), "--wait", "--iters", "40", "--seq-lens", "16,32"},
                  QuietStdout(Program("libseqpoint_mimic_rnn.so")));
  json entry = AttachedEntry(d, w.pid());
  REQUIRE_MESSAGE(!entry.is_null(), d.Log());
  CHECK(entry["probe"] == "usdt");
  w.SendLine("go\n");
  w.Wait();
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  CHECK(run["iterations"] == 40);
}

TEST_CASE("agent zero-code: SIGHUP applies a new probe to processes already running") {
  if (!CanRun()) return;
  TempDir dir;
  std::string config = dir.Write("seqpointd.toml", "[probes]\nzero_code = []\n");
  Seqpointd d(dir, {"--config", config}, "seqpointd.log");
  REQUIRE(d.Ready());
  const std::string key = "zc-reload-" + std::to_string(getpid());
  TrainingChild w(key, {Program("mimic_workload"), "gemm", "60", "5", "--wait"}, QuietStdout());
  // Not a target under the first config; a bad config is refused and changes nothing.
  dir.Write("seqpointd.toml", "[probes]\nzero_code = [\"no-such-preset\"]\n");
  d.Signal(SIGHUP);
  REQUIRE(
      WaitFor([&] { return d.Log().find("failed, nothing was changed") != std::string::npos; }));
  CHECK(d.Log().find("no zero-code preset 'no-such-preset'") != std::string::npos);
  dir.Write("seqpointd.toml", kMimicGemm);
  d.Signal(SIGHUP);
  json entry = AttachedEntry(d, w.pid());  // the reload rescans /proc
  REQUIRE_MESSAGE(!entry.is_null(), d.Log());
  CHECK(entry["probe"] == "zero-code mimic-gemm");
  w.SendLine("go\n");
  CHECK(WEXITSTATUS(w.Wait()) == 0);
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  CHECK(run["iterations"] == 60);
}

TEST_CASE("agent zero-code: --check-config refuses an unknown preset and a bad field") {
  if (access(SeqpointdBinary().c_str(), X_OK) != 0) return;
  TempDir dir;
  auto check = [&](const std::string& toml, std::string* out) {
    std::string path = dir.Write("c.toml", toml);
    std::string cmd = SeqpointdBinary() + " --check-config --config " + path + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    out->clear();
    while (p && fgets(buf, sizeof buf, p)) *out += buf;
    int status = p ? pclose(p) : -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  CHECK(check(kMimicGemm, &out) == 0);
  CHECK(check("[probes]\nzero_code = [\"cudnn_rnn\"]\n", &out) == 2);
  CHECK(out.find("c.toml:2:") != std::string::npos);
  CHECK(out.find("no zero-code preset 'cudnn_rnn' (presets: miopen-rnn, cudnn-rnn,") !=
        std::string::npos);
  CHECK(check(std::string(kMimicGemm) + "bytes = 16\n", &out) == 2);
  CHECK(out.find("c.toml:9:9: key 'probes.zero_code_custom.mimic-gemm.bytes' must be 4 or 8") !=
        std::string::npos);
}
