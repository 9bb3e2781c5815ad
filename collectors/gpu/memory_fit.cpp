// See memory_fit.h.
#include "collectors/gpu/memory_fit.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace seqpoint::collectors {

MemoryFit FitMemory(const std::vector<MemoryPoint>& bins, double capacity_bytes) {
  MemoryFit fit;
  std::set<double> sls;
  for (const MemoryPoint& p : bins) sls.insert(p.seq_len);
  if (sls.size() < 3) {
    fit.why = "memory fit needs bins of at least 3 distinct SLs, has " + std::to_string(sls.size());
    return fit;
  }
  if (capacity_bytes <= 0) {
    fit.why = "the GPU's memory capacity is unknown";
    return fit;
  }
  const double n = static_cast<double>(bins.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
  for (const MemoryPoint& p : bins) {
    sx += p.seq_len;
    sy += p.peak_bytes;
    sxx += p.seq_len * p.seq_len;
    sxy += p.seq_len * p.peak_bytes;
    syy += p.peak_bytes * p.peak_bytes;
  }
  const double vx = sxx - sx * sx / n, vy = syy - sy * sy / n, cxy = sxy - sx * sy / n;
  fit.bytes_per_sl = cxy / vx;
  fit.intercept_bytes = (sy - fit.bytes_per_sl * sx) / n;
  fit.r2 = vy > 0 ? cxy * cxy / (vx * vy) : 0;
  if (fit.bytes_per_sl <= 0) {
    fit.why = "peak memory does not grow with SL in these bins: no SL runs out of memory";
    return fit;
  }
  if (fit.r2 < 0.9) {
    fit.why = "peak memory is not linear in SL (R^2 " + std::to_string(fit.r2).substr(0, 4) +
              " < 0.9): attention growing as SL^2, or allocator caching";
    return fit;
  }
  fit.supported = true;
  fit.exceed_sl = (capacity_bytes - fit.intercept_bytes) / fit.bytes_per_sl;
  const double max_sl = *sls.rbegin();
  fit.extrapolated = *fit.exceed_sl > 2 * max_sl;
  if (fit.extrapolated) fit.why = "beyond twice the largest measured SL: a line is a guess there";
  return fit;
}

}  // namespace seqpoint::collectors
