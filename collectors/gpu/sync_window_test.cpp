// The window rule of sync_window.h on given marks (the real probes on a real libcudart process:
// probes/sync/sync_probes_test.cpp).
#include "collectors/gpu/sync_window.h"

#include <doctest/doctest.h>

namespace seqpoint::collectors {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST_CASE("sync window: the first sync at or after the CPU end closes it, earlier ones do not") {
  SyncWindow w({.bound_ns = 1000 * kMs});
  w.EndCpu(10'000 * kMs);
  // The latest sync is before the end by more than the 2 ms tail (the previous step's): still
  // waiting.
  CHECK(w.Check(10'001 * kMs, SyncReading{9'990 * kMs, 4}) == SyncVerdict::kWaiting);
  CHECK(w.Check(10'500 * kMs, SyncReading{9'990 * kMs, 4}) == SyncVerdict::kWaiting);
  CHECK(w.Check(10'600 * kMs, SyncReading{10'420 * kMs, 5}) == SyncVerdict::kClosed);
  CHECK(w.sync_ns() == 10'420 * kMs);
  CHECK(w.lag_ns() == 420 * kMs);
  // Final: later marks do not move it.
  CHECK(w.Check(12'000 * kMs, SyncReading{11'000 * kMs, 9}) == SyncVerdict::kClosed);
  CHECK(w.sync_ns() == 10'420 * kMs);
}

TEST_CASE("sync window: a sync in the window's tail closes it at its end") {
  // The loop's step ends with loss.item() inside the marked iteration: the sync returned 0.3 ms
  // before the CPU end, so the GPU had caught up there.
  SyncWindow w;
  w.EndCpu(10'000 * kMs);
  CHECK(w.Check(10'000 * kMs, SyncReading{10'000 * kMs - 300'000, 7}) == SyncVerdict::kClosed);
  CHECK(w.lag_ns() == -300'000);
  SyncWindow custom({.bound_ns = 1000 * kMs, .tail_ns = 0});
  custom.EndCpu(10'000 * kMs);
  CHECK(custom.Check(10'000 * kMs, SyncReading{10'000 * kMs - 1, 7}) == SyncVerdict::kWaiting);
}

TEST_CASE("sync window: a sync exactly at the CPU end closes it, one seen late still does") {
  SyncWindow w;
  w.EndCpu(5 * kMs);
  CHECK(w.Check(5 * kMs, SyncReading{5 * kMs, 1}) == SyncVerdict::kClosed);
  SyncWindow late({.bound_ns = 100 * kMs});
  late.EndCpu(5 * kMs);
  // Checked only after the bound (a loaded machine), but the sync came within it.
  CHECK(late.Check(900 * kMs, SyncReading{50 * kMs, 1}) == SyncVerdict::kClosed);
}

TEST_CASE("sync window: no sync within the bound, no probe, no CPU end: not closed, said why") {
  SyncWindow w({.bound_ns = 1000 * kMs});
  w.EndCpu(0);
  CHECK(w.Check(999 * kMs, SyncReading{}) == SyncVerdict::kWaiting);
  CHECK(w.Check(1001 * kMs, SyncReading{}) == SyncVerdict::kNotClosed);
  CHECK(w.why().find("window not closed by a sync") == 0);
  CHECK(w.why().find("1000 ms") != std::string::npos);
  // A sync that comes after the verdict does not reopen it.
  SyncWindow late_sync({.bound_ns = 1000 * kMs});
  late_sync.EndCpu(0);
  // Seen at once (the checking thread was late), but it returned past the bound: not closed.
  CHECK(late_sync.Check(1 * kMs, SyncReading{1300 * kMs, 1}) == SyncVerdict::kNotClosed);
  CHECK(w.Check(1002 * kMs, SyncReading{1002 * kMs, 1}) == SyncVerdict::kNotClosed);

  SyncWindow none;
  none.EndCpu(0);
  CHECK(none.Check(0, std::nullopt, "libcudart not mapped") == SyncVerdict::kNotClosed);
  CHECK(none.why().find("no sync probe") != std::string::npos);
  CHECK(none.why().find("libcudart not mapped") != std::string::npos);

  SyncWindow never;
  CHECK(never.Check(0, SyncReading{5, 1}) == SyncVerdict::kNotClosed);
}

TEST_CASE("sync window: a verdict keeps or leaves out only the GPU-timeline values") {
  const std::vector<Sample> window = {
      DeviceSample("nvml:gpu0:energy", 1e6, "uJ", SampleKind::kDelta, "GPU-a"),
      DeviceSample("nvml:gpu0:sm_active", 0.5, "ratio", SampleKind::kGauge, "GPU-a"),
      DeviceSample("rocm_smi:gpu1:power", 300, "W", SampleKind::kGauge, "0000:0c:00.0"),
      DeviceSample("gpu_metrics:card0:gfx_activity", 0.7, "ratio", SampleKind::kGauge, "card0"),
      DeviceSample("energy_uj", 2e6, "uJ", SampleKind::kDelta, "node"),
      DeviceSample("rapl:package-0", 1e6, "uJ", SampleKind::kDelta, "package-0"),
      Sample{"nvml:gpu0:proc_mem_used", 1e9, "bytes", SampleScope::kProcess, SampleKind::kGauge},
      Sample{"perf:task-clock", 1e6, "ns"},
  };
  SyncWindow closed;
  closed.EndCpu(0);
  closed.Check(0, SyncReading{1, 1});
  std::vector<Sample> kept = window;
  CHECK(ApplySyncVerdict(closed, &kept).empty());
  CHECK(kept.size() == window.size());

  SyncWindow open({.bound_ns = 10});
  open.EndCpu(0);
  REQUIRE(open.Check(11, SyncReading{}) == SyncVerdict::kNotClosed);
  std::vector<Sample> left = window;
  const std::string note = ApplySyncVerdict(open, &left);
  CHECK(note.find("window not closed by a sync") == 0);
  CHECK(note.find("4 GPU value(s) left out") != std::string::npos);
  REQUIRE(left.size() == 4);
  CHECK(left[0].name == "energy_uj");
  CHECK(left[1].name == "rapl:package-0");
  CHECK(left[2].name == "nvml:gpu0:proc_mem_used");
  CHECK(left[3].name == "perf:task-clock");

  SyncWindow waiting;
  waiting.EndCpu(0);
  std::vector<Sample> early = window;
  CHECK(ApplySyncVerdict(waiting, &early).find("still waiting") != std::string::npos);
  CHECK(early.size() == 4);
}

}  // namespace
}  // namespace seqpoint::collectors
