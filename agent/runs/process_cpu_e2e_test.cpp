// The process CPU time of every iteration (process_cpu_sampler.h), end to end: a real
// seqpointd traces a real multi-threaded Python process (the build's Python module; two pool
// threads hashing, which releases the GIL, beside the main thread) and gives each iteration its
// process's CPU time from periodic reads of the process's CPU clock. The run's actual total
// (process_cpu_ns) is held against the workload's own reading of the same iterations
// (CLOCK_PROCESS_CPUTIME_ID read inside the markers, after the pool's work is joined).
// Loose enough for a loaded 2-core VM: interpolation spreads CPU between neighbouring
// iterations, but contiguous iterations telescope, so the total is near exact. Needs root
// (eBPF) and the build's Python module: skips and says why without.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <string>

#include "agent/testing/seqpointd_process.h"
#include "agent/testing/training_child.h"

using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

constexpr int kIterations = 200;

// Writes the sum of its own per-iteration process CPU times to argv[1]; sleeps 0.3 s after the
// last iteration, so the daemon's samples cover its end before the process exits.
const char* kScript = R"(
import concurrent.futures, hashlib, sys, time
import seqpoint_probe as p
if not p.available():
    sys.exit(3)
pool = concurrent.futures.ThreadPoolExecutor(2)
block = b"x" * (1 << 16)
def work(n):
    h = hashlib.sha256()
    for _ in range(n):
        h.update(block)
    return h.digest()
sys.stdin.readline()
own = 0
sls = (8, 16, 32)
for i in range(200):
    sl = sls[i % 3]
    with p.iteration(sl, batch=1, tokens=sl):
        c0 = time.clock_gettime_ns(time.CLOCK_PROCESS_CPUTIME_ID)
        list(pool.map(work, [sl, sl]))
        work(sl // 2)
        own += time.clock_gettime_ns(time.CLOCK_PROCESS_CPUTIME_ID) - c0
time.sleep(0.3)
open(sys.argv[1], "w").write(str(own))
)";

}  // namespace

TEST_CASE("process cpu e2e: every iteration's process CPU time adds up to the workload's own") {
  const std::string module = BinaryDir() + "/sdk/python";
  if (!CanRunProbes()) return;  // says why
  if (access((module + "/seqpoint_probe/__init__.py").c_str(), R_OK) != 0) {
    MESSAGE("skipped: the build's Python module (build/sdk/python) is missing");
    return;
  }
  TempDir dir;
  Seqpointd d(dir, {}, "seqpointd.log");
  REQUIRE(d.Ready());
  const std::string key = "process-cpu-e2e-" + std::to_string(getpid());
  const std::string own_path = dir.File("own.txt");
  {
    TrainingChild job(
        key, {"/usr/bin/env", "PYTHONPATH=" + module, "/usr/bin/python3", "-c", kScript, own_path},
        StderrTo(dir.File("job.log")));
    REQUIRE_MESSAGE(WaitFor([&] { return d.Show(key).is_object(); }), d.Log());
    job.SendLine();
    const int status = job.Wait();
    REQUIRE_MESSAGE(WIFEXITED(status), ReadFile(dir.File("job.log")));
    REQUIRE_MESSAGE(WEXITSTATUS(status) == 0, ReadFile(dir.File("job.log")));
  }
  const json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  const json show = d.Show(key);
  REQUIRE(show.is_object());
  const double own = std::stod(ReadFile(own_path));
  REQUIRE_MESSAGE(show["projections"].contains("process_cpu_ns"), show.dump(1));
  const json& p = show["projections"]["process_cpu_ns"];
  REQUIRE_MESSAGE(p["actual"].is_number(), p.dump());
  const double actual = p["actual"];
  MESSAGE(run["iterations"] << " iterations; process CPU over them " << actual / 1e6
                            << " ms by the daemon, " << own / 1e6 << " ms by the workload ("
                            << 100 * (actual - own) / own << "%)");
  CHECK(run["iterations"] == kIterations);
  // The daemon's windows also hold the few microseconds between iterations and the markers;
  // an iteration its samples miss (none, with the sleep at the end) would be left out.
  CHECK(std::fabs(actual - own) / own < 0.05);
}
