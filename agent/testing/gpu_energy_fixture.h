// Test fixture: a scratch sysfs root holding card0 with the real RX 6900 XT gpu_metrics table
// (tests/data/gpu_metrics, gpu_metrics_v1_3), whose 64-bit energy accumulator (byte 24,
// drivers/gpu/drm/amd/include/kgd_pp_interface.h) the test sets as the SMU firmware would.
// Each update replaces the whole file by rename, so a concurrent reader (the daemon) sees the
// old or the new table, never half of one.
#pragma once

#include <doctest/doctest.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <thread>

#include "agent/testing/test_util.h"
#include "firmware-shim/gpu_metrics/gpu_metrics.h"

namespace seqpoint::daemon::testing {

struct GpuEnergyNode {
  TempDir dir;
  std::string sys = dir.path() + "/sys";
  std::string file = sys + "/class/drm/card0/device/gpu_metrics";
  std::string blob;
  uint64_t base = 0;            // the captured table's own accumulator value
  double joules_per_count = 0;  // 15.259 uJ for this layout

  GpuEnergyNode() {
    std::filesystem::create_directories(sys + "/class/drm/card0/device");
    std::ifstream in(SourceDir() + "/tests/data/gpu_metrics/amdgpu-sysfs-rs_rx6900xt.bin",
                     std::ios::binary);
    blob.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    auto m = firmware::DecodeGpuMetrics(
        std::span(reinterpret_cast<const uint8_t*>(blob.data()), blob.size()));
    REQUIRE(m.ok());
    REQUIRE(m->energy_accumulator.has_value());
    base = *m->energy_accumulator;
    joules_per_count = m->energy_joules_per_count;
    SetMicrojoules(0);
  }
  // The accumulator at base + uj, in whole counts (rounded down, as the firmware counts).
  void SetMicrojoules(double uj) const {
    uint64_t v = base + static_cast<uint64_t>(uj * 1e-6 / joules_per_count);
    std::string b = blob;
    std::memcpy(b.data() + 24, &v, sizeof v);
    {
      std::ofstream out(file + ".tmp", std::ios::binary);
      out << b;
    }
    std::filesystem::rename(file + ".tmp", file);
  }
  double count_uj() const { return joules_per_count * 1e6; }
};

// The firmware: the node's accumulator follows power x elapsed time (CLOCK_MONOTONIC), updated
// every ~1 ms by a thread, as the SMU updates its own. max_lag_ns() is the longest a reader saw
// a stale value: the bound on any one reading's error is watts x that lag.
class GpuFirmware {
 public:
  GpuFirmware(const GpuEnergyNode& node, double watts)
      : node_(node), watts_(watts), t0_(NowNs()) {
    thread_ = std::thread([this] {
      // Real firmware updates on its own clock: as root, keep this one on time on a loaded
      // machine too (best effort; the bounds use the lag that really happened).
      sched_param sp{};
      sp.sched_priority = 10;
      (void)pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
      uint64_t prev_value_at = t0_;
      while (!stop_) {
        const uint64_t value_at = NowNs();
        node_.SetMicrojoules(watts_ * static_cast<double>(value_at - t0_) * 1e-3);
        const uint64_t done = NowNs();
        // Until this update landed, readers saw the value of prev_value_at.
        max_lag_ns_ = std::max<uint64_t>(max_lag_ns_, done - prev_value_at);
        prev_value_at = value_at;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  ~GpuFirmware() {
    stop_ = true;
    thread_.join();
  }
  GpuFirmware(const GpuFirmware&) = delete;
  GpuFirmware& operator=(const GpuFirmware&) = delete;
  double watts() const { return watts_; }
  uint64_t max_lag_ns() const { return max_lag_ns_; }
  void ResetLag() { max_lag_ns_ = 0; }  // from now on (the first write lags the thread start)

 private:
  static uint64_t NowNs() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
  }
  const GpuEnergyNode& node_;
  double watts_;
  uint64_t t0_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> max_lag_ns_{0};
  std::thread thread_;
};

}  // namespace seqpoint::daemon::testing
