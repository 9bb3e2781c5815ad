// The update periods of a daemon's GPU energy counters (nvmlDeviceGetTotalEnergyConsumption),
// each measured once per GPU and never on the event loop (issue 20).
//
// Measuring a period takes ~500 ms of back-to-back reads on an H100 (collectors/energy/
// update_period.h); done in NvmlCollector::Open, once per process and GPU on the daemon's loop,
// it took the woken-record loop latency from p99 11 ms to 147 ms (max 316 ms) on the H100. So
// the first Open of a GPU starts the measurement on a thread of its own and returns at once;
// until the period is known the GPU's energy is left out, saying so (nvml_energy_window.h), and
// every later Open of that GPU, by any process the daemon measures, uses the one result.
//
// Scope: one object per CollectorConfig (NvmlOptions::energy_periods), shared by the collectors
// made from its copies, i.e. one daemon; keyed by the GPU's id (its UUID). Not process-wide:
// tests load several fake NVML libraries whose GPUs share UUIDs.
//
// A measurement that failed (a read error, a counter that did not move) is tried again by the
// next Open of that GPU at least kRetryAfter later, unless NVML said Not Supported.
//
// Threads: every member from any thread (a mutex); the destructor stops each measurement after
// its current read and joins it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "collectors/energy/update_period.h"
#include "collectors/nvml/nvml_library.h"

namespace seqpoint::collectors {

class NvmlEnergyPeriods {
 public:
  static constexpr std::chrono::seconds kRetryAfter{60};
  static constexpr int64_t kSpacingNs = 1'000'000;  // NVML's reads take ms; the doubles' ns

  NvmlEnergyPeriods() = default;
  ~NvmlEnergyPeriods();
  NvmlEnergyPeriods(const NvmlEnergyPeriods&) = delete;
  NvmlEnergyPeriods& operator=(const NvmlEnergyPeriods&) = delete;

  // Starts measuring d's period on its own thread (holding `nvml` until done), unless it is
  // known, being measured, or failed less than kRetryAfter ago. Returns at once.
  void Start(std::shared_ptr<const NvmlLibrary> nvml, const NvmlDevice& d);
  // The GPU's period (or why there is none); nullopt while it is being measured.
  std::optional<UpdatePeriod> Get(const std::string& gpu_id) const;
  // Tests: waits until no measurement runs; false when one still did after `timeout`.
  bool WaitIdle(std::chrono::milliseconds timeout) const;
  // How many measurements were started (tests: one per GPU, whatever the number of Opens).
  int started() const;

 private:
  struct Entry {
    std::thread thread;
    bool running = false;
    std::optional<UpdatePeriod> result;
    std::chrono::steady_clock::time_point finished;
  };
  void Measure(std::shared_ptr<const NvmlLibrary> nvml, NvmlDevice d);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<std::string, Entry> entries_;  // by NvmlDevice::id()
  bool stop_ = false;
  int started_ = 0;
};

}  // namespace seqpoint::collectors
