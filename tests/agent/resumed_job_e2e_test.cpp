// seqpointd on a job resumed from a training checkpoint: a real Python process, marked with
// the Python module (sdk/python), numbers its iterations from its global step (iter = 50,000 +
// i), as LLM training does after a restart. Nothing was missed: the process started after the
// probes were there, and its first index is where its numbering starts, not 50,000 iterations
// run before. (It used to be charged 50,004 unobserved iterations, its time projected at
// +8,535%.) Needs root (eBPF) and the build's Python module.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>

#include "agent/testing/seqpointd_process.h"
#include "agent/testing/training_child.h"

using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

constexpr int kIterations = 600;
constexpr uint64_t kGlobalStep = 50'000;

// Marks kIterations iterations from kGlobalStep on, after a line on stdin (the daemon has
// attached by then); each busy-waits 0.1 ms per token of its SL.
const char* kScript = R"(
import sys, time
import seqpoint_probe as p
if not p.available():
    sys.exit(3)
sys.stdin.readline()
sls = (16, 32, 64)
for i in range(600):
    sl = sls[i % 3]
    with p.iteration(sl, batch=1, tokens=sl, iter=50000 + i):
        end = time.perf_counter() + sl * 1e-4
        while time.perf_counter() < end:
            pass
)";

}  // namespace

TEST_CASE("agent resumed job e2e: iterations numbered from global step 50000 are not a gap") {
  const std::string module = BinaryDir() + "/sdk/python";
  if (!CanRunProbes()) return;
  if (access((module + "/seqpoint_probe/__init__.py").c_str(), R_OK) != 0) {
    MESSAGE("skipped: the build's Python module (build/sdk/python) is missing");
    return;
  }
  TempDir dir;
  Seqpointd d(dir, {}, "seqpointd.log");
  REQUIRE(d.Ready());
  const std::string key = "resumed-e2e-" + std::to_string(getpid());
  {
    TrainingChild job(key,
                      {"/usr/bin/env", "PYTHONPATH=" + module, "/usr/bin/python3", "-c", kScript},
                      StderrTo(dir.File("job.log")));
    REQUIRE_MESSAGE(WaitFor([&] { return d.Show(key).is_object(); }), d.Log());
    job.SendLine();
    int status = job.Wait();
    REQUIRE_MESSAGE(WIFEXITED(status), ReadFile(dir.File("job.log")));
    REQUIRE_MESSAGE(WEXITSTATUS(status) == 0, ReadFile(dir.File("job.log")));
  }
  json run = d.ClosedRun(key);
  REQUIRE_MESSAGE(!run.is_null(), d.Log());
  const uint64_t iterations = run["iterations"], unobserved = run["unobserved"];
  MESSAGE(iterations << " iterations observed, " << unobserved << " unobserved, max_iter "
                     << run["max_iter"]);
  CHECK(run["max_iter"] == kGlobalStep + kIterations - 1);
  CHECK(iterations + unobserved <= kIterations);  // never more than the job ran
  CHECK(unobserved <= 5);                         // was 50,004
  json show = d.Show(key);
  REQUIRE(show.is_object());
  const json& t = show["projections"]["time_ns"];
  const double total = t["total"], actual = t["actual"];
  MESSAGE("time projected " << total << " ns against " << actual << " ns measured ("
                            << 100 * (total - actual) / actual << "%)");
  CHECK(std::fabs(total - actual) / actual < 0.25);  // was +8,535%
}
