// NVML GPM (GPU Performance Monitoring, Hopper and later) over a measured window: the activity
// counters DCGM's profiling fields give, read by a daemon without injection and without the
// perfmon lock CUPTI and Nsight take (GPM uses another GPU unit).
//
// One NvmlGpm per GPU (or MIG GPU instance): two samples (nvmlGpmSampleAlloc), the first taken
// at Begin, the second at End, then one nvmlGpmMetricsGet (version 1, the raw integer) asking
// only for the ids below; each metric's own nvmlReturn is checked and a failed one is left out
// and named.
//
// Refresh: NVML refreshes GPM every 100 ms, so a sample holds the counters as of the last
// refresh: each edge of a window is late by 0..100 ms. A ratio over the window is then off by at
// most 2 x 100 ms / window (the activity is bounded by 0..1). The rule (issue 20: "aggregate or
// widen; say which"): WIDEN, never aggregate. Each window's ratios come with that bound,
// :gpm_edge_error = 2 x refresh / window, the half-width of the interval the true value lies in;
// a window whose bound would exceed 0.1, i.e. shorter than min_window_ns (default 2 s), is left
// out and named in the warnings, never reported as exact. We do not aggregate consecutive
// measured iterations inside the collector: measured iterations are SeqPoints, not neighbours,
// and two samples around several of them would hold the unmeasured iterations between.
// Iterations shorter than 2 s get GPM values only from a window that spans many of them as one
// (bench/gpu/prove.sh measures fixed-SL phases that way).
//
// Samples, DCGM's names (DCGM_FI_PROF_*) with units, all device samples of the GPU's id:
//   nvml:gpu<i>:sm_active, :sm_occupancy, :tensor_active, :dram_active, :fp64_active,
//   :fp32_active, :fp16_active, :gr_engine_active   ratio 0..1, gauges (NVML % / 100)
//   :pcie_tx_bytes, :pcie_rx_bytes, :nvlink_tx_bytes, :nvlink_rx_bytes
//                                                    bytes over the window, deltas (NVML MiB/s
//                                                    x 2^20 x window)
//   :gpm_window_ns                                   ns, gauge: the window the values cover
//   :gpm_edge_error                                  ratio, gauge: 2 x 100 ms / window, the
//                                                    bound on each ratio's edge error
// Not supported (pre-Hopper, vGPU without a whole-GPU MIG profile, a MIG instance without a
// compute instance, a driver without the GPM entry points): Open says which and why, e.g.
// "GPM not supported on NVIDIA A100-SXM4-80GB (Hopper or later needed)".
//
// Threads: one thread drives it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/nvml/nvml_library.h"

namespace seqpoint::collectors {

class NvmlGpm {
 public:
  struct Options {
    int64_t min_window_ns = 2'000'000'000;
    int64_t refresh_ns = 100'000'000;  // NVML's GPM refresh (nvml.h 12.9+)
  };
  // The GPM of `device` (gpu_instance >= 0: that MIG GPU instance). Unsupported with the reason
  // when GPM cannot be read there.
  static Result<NvmlGpm> Open(const NvmlLibrary* nvml, const NvmlDevice& device, int gpu_instance,
                              Options options);
  NvmlGpm(NvmlGpm&& other) noexcept;
  NvmlGpm& operator=(NvmlGpm&& other) noexcept;
  ~NvmlGpm();

  // Takes the first sample at monotonic time now_ns.
  Status Begin(int64_t now_ns);
  // Takes the second, appends the values under `prefix` ("nvml:gpu0") for `device_label`;
  // values left out are named in *warnings. Unavailable when the window gave nothing.
  Status End(int64_t now_ns, const std::string& prefix, const std::string& device_label,
             std::vector<Sample>* out, std::string* warnings);

 private:
  NvmlGpm() = default;
  void Free();

  const NvmlLibrary* nvml_ = nullptr;
  NvmlDevice device_;
  int gpu_instance_ = -1;
  Options options_;
  nvmlGpmSample_t first_ = nullptr;
  nvmlGpmSample_t second_ = nullptr;
  int64_t begin_ns_ = -1;  // -1: no Begin since the last End
};

}  // namespace seqpoint::collectors
