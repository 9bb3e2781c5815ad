// GPUs found under <root>/sys/class/drm: one GpuDevice per cardN whose device directory has a
// gpu_metrics table or a hwmon directory. Discovery lists directories once; the read methods
// then only open/read/close known files, cheap enough for every iteration boundary
// (bench/firmware_shim_bench.cpp measures it).
//
// A device that disappears (hot unplug, driver unbind) makes reads fail with NotFound or
// Unavailable; nothing throws and nothing is cached past a failed read. The energy
// accumulators (EnergyAccumulator) give a monotonic total across counter wrap and reset.
// A GpuDevice is used from one thread at a time (its accumulators are not synchronised).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "firmware-shim/energy_accumulator.h"
#include "firmware-shim/gpu_metrics/gpu_metrics.h"
#include "firmware-shim/hwmon.h"
#include "firmware-shim/sysfs_file.h"

namespace seqpoint::firmware {

// Everything one read of a device produced. Each part has its own status: "no data here" for
// one part never hides the other.
struct DeviceTelemetry {
  std::string card;  // "card0"
  std::optional<uint32_t> pci_vendor, pci_device;
  std::optional<std::string> pci_slot;  // "0000:03:00.0", from device/uevent

  Status metrics_status;  // OK when `metrics` holds a decoded table
  std::optional<GpuMetrics> metrics;
  Status hwmon_status;  // OK when `hwmon` holds a reading (its attributes may still fail)
  std::optional<HwmonReading> hwmon;
};

class GpuDevice {
 public:
  // The largest table the kernel defines is 3872 bytes (gpu_metrics_v1_8); sysfs hands out at
  // most one page. The read buffer holds that with room to spare.
  static constexpr size_t kMetricsBufferBytes = 8192;

  const std::string& card() const { return card_; }
  const std::string& device_dir() const { return device_dir_; }
  bool has_gpu_metrics() const { return has_gpu_metrics_; }
  bool has_hwmon() const { return hwmon_.has_value(); }

  // One open/read/close of device/gpu_metrics plus decode.
  Result<GpuMetrics> ReadGpuMetrics() const;
  // Reads the table and feeds its energy accumulator to the device's EnergyAccumulator;
  // returns the running total in joules since the first call (absent on tables without one).
  Result<std::optional<double>> ReadEnergyTotal();
  DeviceTelemetry ReadAll() const;

 private:
  friend Result<std::vector<GpuDevice>> DiscoverGpus(const SysfsRoot& root);
  std::string card_;
  std::string device_dir_;
  std::string metrics_path_;
  bool has_gpu_metrics_ = false;
  std::optional<Hwmon> hwmon_;
  Status hwmon_discovery_;
  std::optional<EnergyAccumulator> energy_;
};

// The GPUs under `root`, ordered by card number. An empty list when <root>/sys/class/drm has
// no GPU with telemetry; NotFound when `root` itself does not exist.
Result<std::vector<GpuDevice>> DiscoverGpus(const SysfsRoot& root);

}  // namespace seqpoint::firmware
