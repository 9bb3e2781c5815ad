#include "agent/energy/energy_attribution.h"

#include <algorithm>

namespace seqpoint::daemon {

void EnergyAttribution::ProcessFound(pid_t pid, int64_t run_id, uint64_t now_ns) {
  for (const Span& s : spans_) {
    if (s.pid == pid && s.to_ns == kAlive) return;
  }
  spans_.push_back({pid, run_id, now_ns, kAlive});
}

void EnergyAttribution::ProcessExited(pid_t pid, uint64_t now_ns) {
  for (Span& s : spans_) {
    if (s.pid == pid && s.to_ns == kAlive) s.to_ns = std::max(now_ns, s.from_ns);
  }
}

std::optional<uint32_t> EnergyAttribution::Divisor(int64_t run_id, uint64_t begin_ns,
                                                   uint64_t end_ns) const {
  uint32_t own = 0;
  for (const Span& s : spans_) {
    if (s.from_ns > end_ns || s.to_ns < begin_ns) continue;
    if (s.run_id != run_id) return std::nullopt;
    ++own;
  }
  // The iteration's own process is alive in its window; a probe timestamp a little before the
  // process was found (it began before discovery) still counts it.
  return std::max<uint32_t>(own, 1);
}

void EnergyAttribution::Prune(uint64_t before_ns) {
  std::erase_if(spans_, [before_ns](const Span& s) { return s.to_ns < before_ns; });
}

}  // namespace seqpoint::daemon
