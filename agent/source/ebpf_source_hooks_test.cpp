// The live source's begin hooks and probe counters across a budget's slots, on a real process
// with the real probes: the hooks go off at once when a slot is taken, but the probe counters
// stay armed (disarming the last process detaches the sched_switch program, and attaching it
// again blocks the daemon's loop for milliseconds: ~140 times a second at 10,000 iterations a
// second before), and are released once the hooks have stayed off. Skips, saying why, without
// root or without the probes' counter path.
#include <doctest/doctest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "agent/source/live_source.h"
#include "agent/testing/test_util.h"
#include "agent/testing/training_child.h"

namespace seqpoint::daemon {
namespace {

using testing::BinaryDir;
using testing::QuietStdout;
using testing::TempDir;
using testing::TrainingChild;

struct Announced : IterationSink {
  std::set<pid_t> pids;
  void OnProcessFound(const ProcessInfo& p) override { pids.insert(p.pid); }
  void OnIterationBegin(const IterationBegin&) override {}
  void OnIterationEnd(const IterationEnd&) override {}
  void OnIterationCounters(const IterationCounters&) override {}
  void OnProcessExit(const ProcessExit&) override {}
  void OnLibrariesChanged(pid_t) override {}
  void OnCollectiveArrival(uint32_t, uint64_t) override {}
};

// Runs the loop until done() or `seconds` pass.
bool RunUntil(boost::asio::io_context& io, double seconds, const std::function<bool()>& done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    io.restart();
    io.run_for(std::chrono::milliseconds(50));
  }
  return true;
}

TEST_CASE("ebpf source: probe counters stay armed between slots, released once hooks stay off") {
  if (geteuid() != 0) {
    MESSAGE("skipped: the eBPF probes need root (CI runs as root)");
    return;
  }
  const std::string workload = BinaryDir() + "/probes/testing/counter_workload";
  REQUIRE_MESSAGE(access(workload.c_str(), X_OK) == 0, "build counter_workload: " << workload);
  TempDir dir;
  DaemonConfig cfg;
  cfg.state_dir = dir.path() + "/state";
  cfg.runtime_dir = dir.path() + "/run";
  cfg.probes_pin_dir = "";  // nothing left in /sys/fs/bpf
  const std::string key = "ebpf-hooks-test-" + std::to_string(getpid());
  cfg.run_only_key = key;  // other processes on the machine are left alone
  boost::asio::io_context io;
  auto src = MakeLiveSource(io, cfg);
  REQUIRE_MESSAGE(src.ok(), src.status().message());
  Announced sink;
  REQUIRE((*src)->Start(&sink).ok());
  TrainingChild w(key, {workload, "--wait", "--iters", "10", "--threads", "1", "--work-us", "100"},
                  QuietStdout());
  const pid_t pid = w.pid();
  REQUIRE_MESSAGE(RunUntil(io, 30, [&] { return sink.pids.count(pid) > 0; }), "never attached");

  IterationSource& s = **src;
  s.SetBeginHooks(pid, true);  // a slot ahead
  if (s.ProbeCounterEvents(pid).empty()) {
    MESSAGE("skipped: the probes count nothing here (" << s.stats().counters.why << ")");
    s.Stop();
    return;
  }
  s.SetBeginHooks(pid, false);                // the slot is taken
  CHECK(!s.ProbeCounterEvents(pid).empty());  // kept: the next slot would attach them again
  s.SetBeginHooks(pid, true);                 // the next slot
  s.SetBeginHooks(pid, false);
  CHECK(!s.ProbeCounterEvents(pid).empty());
  // No slot comes (a spent budget): released, with no context-switch cost left.
  CHECK(RunUntil(io, 30, [&] { return s.ProbeCounterEvents(pid).empty(); }));
  s.SetBeginHooks(pid, true);  // a later slot arms them again
  CHECK(!s.ProbeCounterEvents(pid).empty());
  s.Stop();
}

}  // namespace
}  // namespace seqpoint::daemon
