// Energy sources: cumulative energy counters of the node's devices, read at the start and end
// of a measured iteration. The energy collector (energy_collector.h) uses the best one present
// for "energy_uj"; per-iteration joules then project a run's energy and energy per token.
//
// Contract: ReadMicrojoules() returns the energy, in microjoules, since an arbitrary origin set
// at Open, summed over the source's devices, never decreasing: each source corrects its raw
// counters' wraps with WrappingCounter. A counter that goes backwards in a way no wrap explains
// (a driver reload, a reset), or a device that disappeared, is an error for that read (the
// caller leaves the window's energy out), and the source re-bases on the next read.
//
// Threads: one thread drives a source.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/counter_wrap.h"
#include "common/status.h"

namespace seqpoint::collectors {

class EnergySource {
 public:
  virtual ~EnergySource() = default;
  // "gpu_metrics", "rocm_smi", "nvml", "rapl".
  virtual std::string_view name() const = 0;
  // NotFound / Unsupported: not present on this node.
  virtual Status Open() = 0;
  virtual Result<double> ReadMicrojoules() = 0;
  virtual std::string Describe() const { return std::string(name()); }
};

// Accumulates a raw counter that counts up and wraps to 0 after `max_value` (RAPL's
// max_energy_range_uj; 0 means a 64-bit counter that does not wrap in practice).
// One read per wrap period at least is the caller's duty: two wraps between reads cannot be
// told from one (for RAPL at 250 W with a 262 kJ range, that is ~17 minutes).
class WrappingCounter {
 public:
  explicit WrappingCounter(uint64_t max_value = 0) : counter_(max_value, 1.0) {}
  // The increase since the previous raw value (0 on the first call). A backwards step that no
  // wrap explains returns Unavailable and re-bases on `raw`.
  Result<uint64_t> Update(uint64_t raw);
  void Reset() { counter_.Reset(); }

 private:
  CounterUnwrapper counter_;
  uint64_t last_ = 0;  // for the message
};

}  // namespace seqpoint::collectors
