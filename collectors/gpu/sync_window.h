// Where a measured window ends on the GPU's timeline. CUDA (and HIP) launches are asynchronous:
// when the CPU reaches an iteration's end, the GPU may still be running that iteration's queued
// kernels (a stream's queue holds about 1,000 launches before a launch blocks), and a window
// read at the CPU end misses that tail and holds the previous iteration's. The rule here:
//
//   A measured window's GPU values (the device samples of the GPU collectors: nvml:gpu*,
//   rocm_smi:gpu*, gpu_metrics:*) end where the GPU has finished what the CPU queued in it,
//   as a synchronisation the process returned from says (probes/sync/sync_probes.h:
//   cudaStreamSynchronize, a device-to-host copy, cuCtxSynchronize, hipDeviceSynchronize, ...):
//   - closed at the end: a sync returned at most `tail_ns` (runs.gpu_sync_tail_ms, 2 ms)
//     before the window's CPU end (a loop whose step ends with loss.item() inside the marked
//     iteration): the GPU had caught up; the GPU values are read at once;
//   - closed at the next sync: else the first sync return after the CPU end, if it comes
//     within `bound_ns` (runs.gpu_sync_bound_ms, 1 s) of it: the GPU values are read then;
//   - otherwise the window's GPU values are flagged "window not closed by a sync" and left
//     out, never reported as that window's. A process without a sync probe (no CUDA/HIP
//     runtime mapped, no eBPF) is not closed either.
//
// It is "close at the next sync, within a bound", not "span until the lead is negligible":
// the lead is measured, not assumed. Training loops sync every step (loss.item(), a logged
// metric, an optimizer's inf check) so the bound is rarely reached; a loop that never syncs
// gets its GPU values flagged, not silently shifted.
//
// The start edge stays the CPU begin: with a sync per step the queue was drained at the
// previous step's sync, before this begin. What the sync probes give is the latest return
// (time, count), read by polling: sync_ns() is the latest return seen at the first check after
// one came, so it is late by at most the check period when the process syncs more than once in
// it. The GPU collectors are read when Check says kClosed: their window is [CPU begin, that read].
//
// Threads: plain data; one thread drives it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectors/collector.h"

namespace seqpoint::collectors {

// The latest sync return of a process, as probes::SyncMark gives it (CLOCK_MONOTONIC ns).
struct SyncReading {
  int64_t last_ns = 0;  // 0: none yet
  uint64_t count = 0;
};

enum class SyncVerdict : uint8_t { kWaiting, kClosed, kNotClosed };
std::string_view SyncVerdictName(SyncVerdict v);  // "waiting", "closed by a sync", ...

inline constexpr std::string_view kNotClosedBySync = "window not closed by a sync";

class SyncWindow {
 public:
  struct Options {
    int64_t bound_ns = 1'000'000'000;
    int64_t tail_ns = 2'000'000;
  };
  SyncWindow() = default;
  explicit SyncWindow(Options options) : options_(options) {}

  // The window's CPU end (the probe's CLOCK_MONOTONIC stamp of the iteration end).
  void EndCpu(int64_t cpu_end_ns);
  // The verdict at now_ns given the process's latest sync (nullopt, with `no_probe_why`: the
  // process has no sync probe). Call until it is not kWaiting; then it stays.
  SyncVerdict Check(int64_t now_ns, const std::optional<SyncReading>& mark,
                    const std::string& no_probe_why = "");

  SyncVerdict verdict() const { return verdict_; }
  int64_t cpu_end_ns() const { return cpu_end_ns_; }
  // kClosed: the sync return that closed it, and how far it came after the CPU end (<= 0:
  // closed at the end by a sync in its tail; > 0: the GPU's lag behind the CPU at this window's
  // end, plus at most one check period).
  int64_t sync_ns() const { return sync_ns_; }
  int64_t lag_ns() const { return sync_ns_ - cpu_end_ns_; }
  // kNotClosed: why, one line ("window not closed by a sync: no CUDA sync within 1000 ms ...").
  const std::string& why() const { return why_; }

 private:
  Options options_;
  int64_t cpu_end_ns_ = -1;
  int64_t sync_ns_ = -1;
  SyncVerdict verdict_ = SyncVerdict::kWaiting;
  std::string why_;
};

// Whether a sample is a GPU-timeline value the verdict governs: a device sample of a GPU
// collector (nvml:, rocm_smi:, gpu_metrics:). Node energy, RAPL and process samples are not:
// they are CPU-side or whole-node and keep the CPU window.
bool IsGpuTimelineSample(const Sample& s);
// Whether a collector reads the GPU's timeline (its End is what a sync closes): "nvml",
// "rocm_smi", "gpu_metrics". The others (perf, PAPI, RAPL, the node's energy) end at the CPU
// end marker, never later.
bool IsGpuTimelineCollector(std::string_view collector);

// Applies a final verdict to a window's samples: kClosed keeps them all; kNotClosed removes the
// GPU-timeline samples and returns the note naming how many and why ("" when nothing was
// removed). kWaiting is a caller error: removes them too (never reported unclosed).
std::string ApplySyncVerdict(const SyncWindow& window, std::vector<Sample>* samples);

}  // namespace seqpoint::collectors
