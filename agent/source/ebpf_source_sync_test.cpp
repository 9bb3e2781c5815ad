// GpuSyncWatch, the eBPF source's sync probes, on a real process calling the real CUDA runtime
// (libcudart.so.13 of the CUDA toolkit; no GPU needed: each call is entered and returns an
// error at once), and the window rule on what it reads. Skips, saying why, without root or
// without the toolkit ($SEQPOINT_CUDA_LIB_DIR, else /usr/local/cuda/lib64).
#include "agent/source/ebpf_source_sync.h"

#include <doctest/doctest.h>

#include <sstream>

#include "probes/sync/sync_workload_driver.h"
#include "probes/testing/child_process.h"

namespace seqpoint::daemon {
namespace {

using probes::testing::BuildPath;
using probes::testing::ChildProcess;
using probes::testing::CudaRuntimeOrSkip;
using probes::testing::RequireLine;

TEST_CASE("gpu sync watch: a real libcudart's syncs close a window, and before it loads it says why") {
  const std::string cudart = CudaRuntimeOrSkip();
  if (cudart.empty() || !probes::testing::CanUseBpf()) return;
  GpuSyncWatch watch;
  REQUIRE_MESSAGE(watch.loaded(), watch.why_not_loaded());
  auto child = ChildProcess::Start({BuildPath("probes/sync_workload"), cudart});
  REQUIRE_MESSAGE(child.ok(), child.status().ToString());
  REQUIRE(RequireLine(*child).rfind("ready ", 0) == 0);
  const int pid = child->pid();

  // No runtime mapped yet: no mark, and why (the window would be flagged, not closed).
  CHECK(watch.Attach(pid).code() == ErrorCode::kNotFound);
  auto none = watch.Mark(pid);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("libcudart") != std::string::npos);
  collectors::SyncWindow flagged;
  flagged.EndCpu(1);
  CHECK(flagged.Check(2, std::nullopt, none.status().message()) ==
        collectors::SyncVerdict::kNotClosed);
  CHECK(flagged.why().find("no sync probe") != std::string::npos);

  // It loads the runtime (PyTorch does at its first CUDA call): the next Mark attaches.
  REQUIRE(child->WriteLine("load").ok());
  REQUIRE(RequireLine(*child) == "loaded");
  auto zero = watch.Mark(pid);
  REQUIRE_MESSAGE(zero.ok(), zero.status().ToString());
  CHECK(zero->count == 0);
  CHECK(watch.Describe(pid).find("cudaStreamSynchronize") != std::string::npos);

  // A window whose CPU end came before the process's next cudaStreamSynchronize.
  REQUIRE(child->WriteLine("now").ok());
  long long end_ns = 0;
  {
    std::istringstream in(RequireLine(*child));
    std::string word;
    in >> word >> end_ns;
    REQUIRE(word == "now");
  }
  collectors::SyncWindow window;
  window.EndCpu(end_ns);
  CHECK(window.Check(end_ns + 1, *zero) == collectors::SyncVerdict::kWaiting);
  REQUIRE(child->WriteLine("sync").ok());
  long long t0 = 0, t1 = 0;
  {
    std::istringstream in(RequireLine(*child));
    std::string word;
    in >> word >> t0 >> t1;
    REQUIRE(word == "synced");
  }
  auto mark = watch.Mark(pid);
  REQUIRE(mark.ok());
  CHECK(mark->count == 1);
  CHECK(mark->last_ns >= t0);
  CHECK(mark->last_ns <= t1);
  CHECK(window.Check(t1, *mark) == collectors::SyncVerdict::kClosed);
  CHECK(window.sync_ns() == mark->last_ns);
  CHECK(window.lag_ns() > 0);

  // Detached: a later Mark attaches afresh, and counts only syncs from then on.
  watch.Detach(pid);
  auto fresh = watch.Mark(pid);
  REQUIRE(fresh.ok());
  CHECK(fresh->count == 0);
  (void)child->WriteLine("exit");
}

}  // namespace
}  // namespace seqpoint::daemon
