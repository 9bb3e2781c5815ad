// The sync probes on a real process calling the real CUDA runtime (libcudart.so.13 of the CUDA
// toolkit; no GPU needed: each call is entered and returns an error at once). The toolkit is
// found in $SEQPOINT_CUDA_LIB_DIR, else /usr/local/cuda/lib64; without it the cases skip and
// say so.
#include "probes/sync/sync_probes.h"

#include <doctest/doctest.h>

#include <optional>
#include <sstream>

#include "collectors/gpu/sync_window.h"
#include "probes/sync/sync_workload_driver.h"
#include "probes/testing/child_process.h"

namespace seqpoint::probes {
namespace {

using testing::BuildPath;
using testing::ChildProcess;
using testing::CudaRuntimeOrSkip;
using testing::RequireLine;

bool Contains(const std::vector<std::string>& v, const std::string& prefix) {
  for (const std::string& s : v) {
    if (s.rfind(prefix + " (", 0) == 0) return true;
  }
  return false;
}

TEST_CASE(
    "sync probes: the returns of a real process's libcudart syncs, device-to-host copies "
    "only") {
  const std::string cudart = CudaRuntimeOrSkip();
  if (cudart.empty() || !testing::CanUseBpf()) return;
  auto probes = SyncProbes::Create();
  REQUIRE_MESSAGE(probes.ok(), probes.status().ToString());
  auto child = ChildProcess::Start({BuildPath("probes/sync_workload"), cudart});
  REQUIRE_MESSAGE(child.ok(), child.status().ToString());
  const std::string ready = RequireLine(*child);
  REQUIRE(ready.rfind("ready ", 0) == 0);
  const int pid = child->pid();

  // Before the runtime is loaded: nothing to attach, said so, and not watched.
  auto early = (*probes)->AttachPid(pid);
  CHECK(early.status().code() == ErrorCode::kNotFound);
  CHECK(early.status().message().find("libcudart") != std::string::npos);
  CHECK_FALSE((*probes)->Attached(pid));

  REQUIRE(child->WriteLine("load").ok());
  REQUIRE(RequireLine(*child) == "loaded");
  auto attached = (*probes)->AttachPid(pid);
  REQUIRE_MESSAGE(attached.ok(), attached.status().ToString());
  for (const char* fn :
       {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy"}) {
    CHECK_MESSAGE(Contains(*attached, fn), fn);
  }
  auto before = (*probes)->Mark(pid);
  REQUIRE(before.ok());
  CHECK(before->count == 0);
  CHECK(before->last_ns == 0);

  REQUIRE(child->WriteLine("burst").ok());
  std::istringstream last(RequireLine(*child));
  std::string word;
  long long t0 = 0, t1 = 0;
  last >> word >> t0 >> t1;
  REQUIRE(word == "last");
  REQUIRE(RequireLine(*child) == "done 7");
  auto mark = (*probes)->Mark(pid);
  REQUIRE(mark.ok());
  // 3 stream syncs + 2 device-to-host copies + 1 event sync + 1 device sync; the 2
  // host-to-device copies are no syncs.
  CHECK(mark->count == 7);
  CHECK(mark->function == "cudaDeviceSynchronize");
  // The mark is the last return: inside the stamps around the last call.
  CHECK(mark->last_ns >= t0);
  CHECK(mark->last_ns <= t1);

  (*probes)->DetachPid(pid);
  CHECK((*probes)->Mark(pid).status().code() == ErrorCode::kNotFound);
  REQUIRE(child->WriteLine("exit").ok());
  CHECK(child->Wait().ok());
}

long long Stamp(ChildProcess& child, const std::string& command, const std::string& word) {
  REQUIRE(child.WriteLine(command).ok());
  std::istringstream in(RequireLine(child));
  std::string got;
  long long t = 0;
  in >> got >> t;
  REQUIRE(got == word);
  return t;
}

// The window rule of collectors/gpu/sync_window.h on the real marks: a window whose CPU end is
// followed by a real cudaStreamSynchronize is closed at that return; one with no sync after it
// is flagged and its GPU values left out.
TEST_CASE("sync window: closed by the real process's next cudaStreamSynchronize, else flagged") {
  const std::string cudart = CudaRuntimeOrSkip();
  if (cudart.empty() || !testing::CanUseBpf()) return;
  auto probes = SyncProbes::Create();
  REQUIRE_MESSAGE(probes.ok(), probes.status().ToString());
  auto child = ChildProcess::Start({BuildPath("probes/sync_workload"), cudart});
  REQUIRE_MESSAGE(child.ok(), child.status().ToString());
  REQUIRE(RequireLine(*child).rfind("ready ", 0) == 0);
  REQUIRE(child->WriteLine("load").ok());
  REQUIRE(RequireLine(*child) == "loaded");
  const int pid = child->pid();
  REQUIRE((*probes)->AttachPid(pid).ok());
  auto reading = [&]() -> std::optional<collectors::SyncReading> {
    auto m = (*probes)->Mark(pid);
    if (!m.ok()) return std::nullopt;
    return collectors::SyncReading{m->last_ns, m->count};
  };
  collectors::SyncWindow::Options options;
  options.bound_ns = 200'000'000;

  // A sync before the window's end (more than the tail before it) does not close it; the one
  // after does.
  options.tail_ns = 0;
  Stamp(*child, "sync", "synced");
  collectors::SyncWindow closed(options);
  const long long cpu_end = Stamp(*child, "now", "now");
  closed.EndCpu(cpu_end);
  CHECK(closed.Check(cpu_end, reading()) == collectors::SyncVerdict::kWaiting);
  REQUIRE(child->WriteLine("sync").ok());
  std::istringstream synced(RequireLine(*child));
  std::string word;
  long long t0 = 0, t1 = 0;
  synced >> word >> t0 >> t1;
  // However late the check (a loaded machine), the verdict is the sync's, not the clock's.
  CHECK(closed.Check(t1 + 10'000'000'000LL, reading()) == collectors::SyncVerdict::kClosed);
  CHECK(closed.sync_ns() >= t0);
  CHECK(closed.sync_ns() <= t1);
  CHECK(closed.lag_ns() > 0);

  // A sync in the window's tail closes it at its end (the default 2 ms tail; the real return
  // stamped by the workload).
  REQUIRE(child->WriteLine("sync").ok());
  std::istringstream tail(RequireLine(*child));
  long long s0 = 0, s1 = 0;
  tail >> word >> s0 >> s1;
  auto returned = reading();
  REQUIRE(returned.has_value());
  CHECK(returned->last_ns >= s0);
  CHECK(returned->last_ns <= s1);
  collectors::SyncWindow at_end;
  const int64_t end3 = returned->last_ns + 1'000'000;  // the iteration ends 1 ms after it
  at_end.EndCpu(end3);
  CHECK(at_end.Check(end3, reading()) == collectors::SyncVerdict::kClosed);
  CHECK(at_end.lag_ns() == -1'000'000);

  // No sync after the CPU end: waiting within the bound, then flagged; GPU values left out.
  collectors::SyncWindow open(options);
  const long long end2 = Stamp(*child, "now", "now");
  open.EndCpu(end2);
  CHECK(open.Check(end2 + 1'000'000, reading()) == collectors::SyncVerdict::kWaiting);
  CHECK(open.Check(end2 + 300'000'000, reading()) == collectors::SyncVerdict::kNotClosed);
  std::vector<collectors::Sample> samples = {
      collectors::DeviceSample("nvml:gpu0:energy", 5e6, "uJ", collectors::SampleKind::kDelta,
                               "GPU-1"),
      collectors::Sample{"perf:task-clock", 1e6, "ns"}};
  const std::string note = collectors::ApplySyncVerdict(open, &samples);
  CHECK(note.find("window not closed by a sync") != std::string::npos);
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].name == "perf:task-clock");
  REQUIRE(child->WriteLine("exit").ok());
  CHECK(child->Wait().ok());
}

TEST_CASE("sync probes: a process gone before attach is NotFound, not a crash") {
  if (!testing::CanUseBpf()) return;
  auto probes = SyncProbes::Create();
  REQUIRE_MESSAGE(probes.ok(), probes.status().ToString());
  auto r = (*probes)->AttachPid(999999999);
  CHECK_FALSE(r.ok());
  CHECK_FALSE((*probes)->Attached(999999999));
}

}  // namespace
}  // namespace seqpoint::probes
