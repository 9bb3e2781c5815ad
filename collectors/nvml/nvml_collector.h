// NVML collector: per NVIDIA GPU, the energy over the window (nvmlDeviceGetTotalEnergyConsumption,
// mJ since driver load, Volta and later), and at End the power, utilization, SM and memory
// clocks, memory in use and any configured field values (collectors.nvml.field_ids).
//
// Samples: "nvml:gpu<i>:energy" uJ, ":power" W, ":util_gpu" %, ":util_mem" %, ":sm_clock" MHz,
// ":mem_clock" MHz, ":mem_used" bytes, ":field<id>" (unit "value"). A value NVML does not
// support on this GPU (utilization under MIG, energy before Volta) is left out and named by
// warnings(); a GPU that falls off the bus (NVML_ERROR_GPU_IS_LOST) leaves its values out; if
// no GPU answers, End fails with NVML's reason.
//
// Threads: one thread drives it.
#pragma once

#include <memory>
#include <vector>

#include "collectors/collector.h"
#include "collectors/collector_config.h"
#include "collectors/energy/energy_source.h"
#include "collectors/nvml/nvml_library.h"

namespace seqpoint::collectors {

class NvmlCollector : public Collector {
 public:
  explicit NvmlCollector(NvmlOptions options) : options_(std::move(options)) {}

  std::string_view name() const override { return "nvml"; }
  Status Open(const Target& target) override;
  Status Begin() override;
  Result<std::vector<Sample>> End() override;
  void Close() override;
  std::string warnings() const override { return warnings_; }
  std::string Describe() const override;

 private:
  struct Device {
    NvmlDevice id;
    WrappingCounter energy;
    bool energy_ok = false;
  };
  NvmlOptions options_;
  std::unique_ptr<NvmlLibrary> nvml_;
  std::vector<Device> devices_;
  std::string warnings_;
};

// Energy source: the sum of every GPU's total energy counter.
class NvmlEnergySource : public EnergySource {
 public:
  explicit NvmlEnergySource(std::string library) : library_(std::move(library)) {}
  std::string_view name() const override { return "nvml"; }
  Status Open() override;
  Result<double> ReadMicrojoules() override;
  std::string Describe() const override;

 private:
  std::string library_;
  std::unique_ptr<NvmlLibrary> nvml_;
  std::vector<WrappingCounter> counters_;
  double total_uj_ = 0;
};

}  // namespace seqpoint::collectors
