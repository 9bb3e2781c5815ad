// At which SL a job would run out of GPU memory: a least-squares line through the per-SL-bin
// peaks of the process's GPU memory (nvml:gpu<i>:proc_mem_used, KFD vram_<gpu_id>), solved for
// the GPU's capacity. Activation memory grows linearly with SL for RNNs and for attention with
// fused kernels (flash attention); plain attention grows as SL^2, which shows as a poor fit.
//
// The answer is given only where the data carry it: at least 3 bins of distinct SLs, a positive
// slope, R^2 >= 0.9; the crossing is flagged `extrapolated` when it lies beyond twice the
// largest measured SL (a line is then a guess). Otherwise `why` says what is missing.
//
// Threads: a plain function.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace seqpoint::collectors {

struct MemoryPoint {
  double seq_len = 0;
  double peak_bytes = 0;
};

struct MemoryFit {
  bool supported = false;  // the data carry a line (see file comment)
  std::string why;         // when not supported, or a note
  double intercept_bytes = 0;
  double bytes_per_sl = 0;
  double r2 = 0;
  std::optional<double> exceed_sl;  // SL at which the fit reaches the capacity
  bool extrapolated = false;        // exceed_sl > 2 x the largest measured SL
};

MemoryFit FitMemory(const std::vector<MemoryPoint>& bins, double capacity_bytes);

}  // namespace seqpoint::collectors
