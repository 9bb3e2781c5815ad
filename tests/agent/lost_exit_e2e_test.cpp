// Issue 19: processes of one run whose exit events were lost end in the order they really
// ended. Discovery's ring buffer (probes/discovery/process_watch.bpf.c) is overflowed for real,
// not through a seam: while the daemon is stopped (SIGSTOP), this process loads and unloads a
// library thousands of times; each load and unload is a record of the dynamic linker's hook in
// that ring (a library load by any process on the node, as a busy node has), far more than it
// holds. Then the rank with the higher pid is killed and the other exits normally: both exit
// events find the ring full. Ended in pid order (what the daemon did), the survivor went first,
// "exited" with no status, and the killed rank closed the run as finished: the rank's death and
// the order of ends were both lost. The kernel keeps each watched process's exit (time and wait
// status) where a full ring cannot drop it, so the daemon must end the killed rank first, as
// killed by SIGKILL, and say that its exit event was lost.
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/testing/seqpointd_process.h"
#include "agent/testing/training_child.h"
#include "tests/agent/exit_test_helpers.h"

using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

// Each dlopen and dlclose of a library not loaded yet changes the link map: the dynamic
// linker's hook queues (at least) one 48-byte record in discovery's 256 KiB ring per change, so
// 4,000 round trips are 8,000 records or more, where the ring holds 5,461.
void FloodDiscoveryRing(const std::string& library) {
  for (int i = 0; i < 4000; ++i) {
    if (void* h = dlopen(library.c_str(), RTLD_NOW)) dlclose(h);
  }
}

}  // namespace

TEST_CASE(
    "agent lost exit e2e: processes whose exit events were lost end in the order they ended") {
  if (!CanRunProbes()) return;
  if (access(UsdtWorkload().c_str(), X_OK) != 0) {
    MESSAGE("skipped: usdt_workload is not built");
    return;
  }
  const std::string library = UnloadedLibrary();
  if (library.empty()) {
    MESSAGE("skipped: no library to load and unload here (libresolv, libz, ...)");
    return;
  }
  TempDir dir;
  const std::string key = "lost-exit-" + std::to_string(getpid());
  // Both hold after their last iteration until a line comes: neither ends while the daemon runs.
  const std::string args = "--wait --hold --iters 60 --work-us 2000 --seq-lens 8,16,32";
  TrainingChild a(key, HeldRank(args, dir.File("a.out")));
  TrainingChild b(key, HeldRank(args, dir.File("b.out")));
  REQUIRE(WaitFor([&] { return IsWorkload(a.pid()) && IsWorkload(b.pid()); }));
  // What the daemon learns after it resumes comes from its idle check and the source's exit
  // path alone.
  Seqpointd d(dir, {"--config", SleepyDaemonConfig(dir, key)}, "seqpointd.log");
  REQUIRE(d.Ready());
  REQUIRE_MESSAGE(RanksJoined(d, key, 2), d.Log());
  a.SendLine();
  b.SendLine();
  REQUIRE(WaitFor([&] {
    return ReadFile(dir.File("a.out")).find("done") != std::string::npos &&
           ReadFile(dir.File("b.out")).find("done") != std::string::npos;
  }));
  // The higher pid dies first: pid order is then the wrong order.
  TrainingChild& first = a.pid() > b.pid() ? a : b;
  TrainingChild& last = a.pid() > b.pid() ? b : a;
  const pid_t killed = first.pid(), survivor = last.pid();
  usleep(100'000);  // the daemon waits in its loop
  d.Signal(SIGSTOP);
  FloodDiscoveryRing(library);
  first.Kill();
  first.Wait();
  usleep(20'000);
  last.SendLine();
  last.Wait();
  FloodDiscoveryRing(library);  // whatever the kernel freed meanwhile: full again
  d.Signal(SIGCONT);
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  const std::string log = d.Log();
  MESSAGE("killed pid " << killed << ", survivor pid " << survivor << "; closed " << run["state"]
                        << ": " << run["end_reason"]);
  REQUIRE_MESSAGE(SumOf(d.Metrics(), "seqpoint_probe_lost_events_total") > 0,
                  "the ring did not overflow:\n"
                      << log);
  // The exits were read from the kernel's record, not from the events.
  CHECK_MESSAGE(log.find("exit event was lost") != std::string::npos, log);
  const std::string killed_line = "(pid " + std::to_string(killed) +
                                  ") killed by signal 9 (SIGKILL); the run goes on with 1 rank";
  CHECK_MESSAGE(log.find(killed_line) != std::string::npos, log);
  CHECK(run["state"] == "crashed");
  CHECK(run["end_reason"].get<std::string>().find("pid " + std::to_string(killed)) == 0);
  CHECK(run["iterations"].get<uint64_t>() == 60);
}
