// Test fixture: a scratch sysfs root holding card0 with the real RX 6900 XT gpu_metrics table
// (tests/data/gpu_metrics, gpu_metrics_v1_3), whose 64-bit energy accumulator (byte 24,
// drivers/gpu/drm/amd/include/kgd_pp_interface.h) the test sets as the SMU firmware would.
// Each update replaces the whole file by rename, so a concurrent reader (the daemon) sees the
// old or the new table, never half of one.
#pragma once

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>

#include "agent/testing/test_util.h"
#include "firmware-shim/gpu_metrics.h"

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

}  // namespace seqpoint::daemon::testing
