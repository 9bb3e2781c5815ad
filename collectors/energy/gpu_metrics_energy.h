// Energy source over amdgpu's gpu_metrics energy accumulator, decoded by our firmware-shim
// (every format and content revision, where ROCm SMI 5.2 decodes format 1 content <= 3 only)
// and accumulated wrap-safe by firmware::EnergyAccumulator (the 32-bit v1_0 counter wraps
// every ~3.6 min at 300 W). A counter reset (driver reload, GPU reset) voids that read: the
// window's energy is left out, never under-reported.
//
// Present only when every AMD GPU's table carries an accumulator (APU tables, format 2/3, do
// not): a partial sum over some GPUs would be a wrong number.
//
// Root convention: the firmware-shim reads <root>/sys/class/drm where <root> stands for "/";
// the collectors' sysfs_root is the /sys directory itself, so this source uses its parent.
//
// Threads: one thread drives it.
#pragma once

#include <string>
#include <vector>

#include "collectors/energy/energy_source.h"
#include "firmware-shim/energy_accumulator.h"
#include "firmware-shim/gpu_device.h"

namespace seqpoint::collectors {

class GpuMetricsEnergySource : public EnergySource {
 public:
  explicit GpuMetricsEnergySource(std::string sysfs_root) : sysfs_root_(std::move(sysfs_root)) {}
  std::string_view name() const override { return "gpu_metrics"; }
  Status Open() override;
  Result<double> ReadMicrojoules() override;
  std::string Describe() const override;

 private:
  std::string sysfs_root_;
  std::vector<firmware::GpuDevice> devices_;
  std::vector<firmware::EnergyAccumulator> accumulators_;
  std::string layouts_;
  double total_uj_ = 0;
};

}  // namespace seqpoint::collectors
