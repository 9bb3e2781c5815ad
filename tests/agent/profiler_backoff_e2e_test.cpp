// seqpointd getting out of a profiler's way, end to end (issue 12, item 4): the real binary,
// the real eBPF probes on a real USDT workload that maps a mimic CUPTI (libcupti.so.12, loaded
// by LD_PRELOAD as a profiler's injection would be); the back-off and its reason are read back
// from status, show and /metrics, as operators see them. Then pause/resume over the control
// socket and through the CLI, and the run's attribution labels from its environment. Needs
// root (BPF); skips otherwise.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>

#include "agent/testing/seqpointd_process.h"
#include "agent/testing/training_child.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

bool CanRun() {
  return CanRunProbes();
}

std::string Workload() { return UsdtWorkload(); }

// The control request through the socket of the Seqpointd started in `dir`.
json Ask(const TempDir& dir, ControlRequest r) {
  auto s = SendControlRequest(dir.path() + "/run/control.sock", r);
  return s.ok() ? *s : json();
}

// `seqpoint ARGS` with the daemon's socket; its stdout.
std::string Cli(const TempDir& dir, const std::string& args) {
  const std::string cmd = BinaryDir() + "/agent/cli/seqpoint " + args + " --socket " + dir.path() +
                          "/run/control.sock 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace

TEST_CASE("agent e2e: a process mapping CUPTI is left to the profiler, with the reason shown") {
  if (!CanRun() || access(Workload().c_str(), X_OK) != 0) return;
  TempDir dir;
  Seqpointd d(dir,
              {"--config", dir.Write("c.toml",
                                     "[runs]\nprofiler_scan_interval_ms = 200\n"
                                     "profiler_hold_down_s = 2\n")},
              "seqpointd.log");
  REQUIRE(d.Ready());
  const std::string key = "e2e-profiled-" + std::to_string(getpid());
  // The job's name and world size as a launcher sets them, inherited by the child.
  setenv("SEQPOINT_JOB_NAME", "gru \"de-en\"", 1);
  setenv("WORLD_SIZE", "8", 1);
  TrainingChild w(key,
                  {Workload(), "--wait", "--loop", "--loop-sleep-us", "2000", "--work-us", "500",
                   "--seq-lens", "8,16,32,64"},
                  QuietStdout(BinaryDir() + "/agent/runs/libcupti.so.12"));
  unsetenv("SEQPOINT_JOB_NAME");
  unsetenv("WORLD_SIZE");
  REQUIRE(WaitFor([&] { return d.Show(key).is_object(); }));  // attached at exec
  w.SendLine();
  json backed;
  REQUIRE_MESSAGE(WaitFor([&] {
                    json st = d.Request("status");
                    if (!st.is_object() || st["collectors_backed_off"].empty()) return false;
                    backed = st["collectors_backed_off"][0];
                    return true;
                  }),
                  d.Log());
  CHECK(backed["pid"] == w.pid());
  CHECK(backed["reason"] == "profiler");
  CHECK(backed["profiler"] == "libcupti");
  CHECK(backed["evidence"].get<std::string>().find("libcupti.so.12") != std::string::npos);
  json show = d.Show(key);
  REQUIRE(show["collectors_backed_off"].size() == 1);
  CHECK(show["collectors_backed_off"][0]["reason"] == "profiler");
  CHECK(show["run"]["job_name"] == "gru__de-en_");  // sanitized: no quotes, no spaces
  CHECK(show["run"]["world_size"] == "8");
  CHECK(!show["run"]["node"].get<std::string>().empty());
  const std::string metrics = d.Metrics();
  CHECK(metrics.find("reason=\"profiler\",profiler=\"libcupti\"} 1") != std::string::npos);
  CHECK(metrics.find("seqpoint_collector_backoffs_total{reason=\"profiler\"} 1") !=
        std::string::npos);
  CHECK(metrics.find("job_name=\"gru__de-en_\"") != std::string::npos);
  CHECK(metrics.find("world_size=\"8\"") != std::string::npos);
  CHECK(Cli(dir, "show " + key).find("being profiled") != std::string::npos);
  // Nothing measured while the profiler is there: the run's SeqPoints are timed only.
  json runs = d.Request("runs");
  for (const json& r : runs["runs"]) {
    if (r["key"] == key) CHECK(r["collectors_backed_off"].size() == 1);
  }
  w.SendLine();
  CHECK(w.Wait() == 0);
  CHECK(d.Log().find("is being profiled (maps") != std::string::npos);
}

TEST_CASE("agent e2e: pause --for stops the collectors and resumes by itself, resume at once") {
  if (!CanRun()) return;
  TempDir dir;
  Seqpointd d(dir, {"--config", dir.Write("c.toml", "[runs]\nprofiler_scan_interval_ms = 100\n")},
              "seqpointd.log");
  REQUIRE(d.Ready());
  ControlRequest pause;
  pause.cmd = "pause";
  pause.for_ms = 2000;
  json p = Ask(dir, pause);
  REQUIRE(p.is_object());
  CHECK(p["paused"] == true);
  CHECK(p["until_unix_ns"].is_number());
  CHECK(d.Request("status")["collectors_paused"]["paused"] == true);
  CHECK(d.Metrics().find("seqpoint_collectors_paused 1") != std::string::npos);
  CHECK(Cli(dir, "status").find("collectors PAUSED") != std::string::npos);
  const auto asked = std::chrono::steady_clock::now();
  REQUIRE(WaitFor([&] { return d.Request("status")["collectors_paused"]["paused"] == false; },
                  std::chrono::seconds(10)));
  const double after_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  MESSAGE("pause --for 2s: resumed after " << after_s << " s");
  CHECK(after_s >= 1.8);  // asked a moment before `asked`
  CHECK(d.Metrics().find("seqpoint_collectors_paused 0") != std::string::npos);

  // By command, through the CLI.
  CHECK(Cli(dir, "pause").find("collectors paused until `seqpoint resume`") != std::string::npos);
  CHECK(d.Request("status")["collectors_paused"]["until_unix_ns"].is_null());
  CHECK(Cli(dir, "resume").find("collectors running") != std::string::npos);
  CHECK(d.Request("status")["collectors_paused"]["paused"] == false);
  CHECK(Cli(dir, "pause --for 2x").find("is not a duration") != std::string::npos);
  CHECK(Cli(dir, "pause --for 8d").find("is not a duration") != std::string::npos);
  CHECK(Cli(dir, "pause --for 200h").find("longer than 7 days") != std::string::npos);
  CHECK(d.Log().find("collectors resume: the pause's duration has passed") != std::string::npos);
}
