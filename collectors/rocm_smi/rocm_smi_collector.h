// ROCm SMI collector: per AMD GPU, the energy counter (delta over the window), and at End the
// average power, busy %, current shader and memory clocks, VRAM in use and its capacity, and
// edge temperature.
//
// Samples: "rocm_smi:gpu<i>:energy" uJ, ":power" W, ":busy" %, ":sclk" MHz, ":mclk" MHz,
// ":vram_used" bytes, ":vram_total" bytes (the capacity, mem_info_vram_total), ":temp_edge" C.
// A value the library cannot read this time (RSMI_STATUS_NOT_SUPPORTED on this ASIC, a file
// gone with the device, EAGAIN from the driver) is left out and named by warnings(); if every
// device fails, End fails.
// Every sample is a device sample (device: the PCI bus id; for a process, its KFD UUID when the
// topology has one); energy a delta, the rest gauges. For a process (Target::pid > 0, no
// Target::device) only the GPUs it has a KFD context on (/sys/class/kfd/kfd/proc/<pid>,
// collectors/gpu/gpu_process_map.h), matched by PCI bus id; a process with none yet is looked up
// again at Begin (at most once a second) and End is Unavailable until then: it is never measured on
// every GPU. The energy counter is gpu_metrics' energy_accumulator as rocm_smi_lib 5.2 decodes it
// (src/rocm_smi.cc rsmi_dev_energy_count_get, resolution 15.3 uJ), so ASICs whose gpu_metrics
// it cannot decode (format 1 content > 3, format 2+) report no energy here: our
// firmware-shim decodes those.
//
// Threads: one thread drives it.
#pragma once

#include <memory>
#include <vector>

#include "collectors/collector.h"
#include "collectors/energy/energy_source.h"
#include "collectors/gpu/gpu_process_map.h"
#include "collectors/rocm_smi/rocm_smi_devices.h"

namespace seqpoint::collectors {

class RocmSmiCollector : public Collector {
 public:
  explicit RocmSmiCollector(std::string sysfs_root) : sysfs_root_(std::move(sysfs_root)) {}

  std::string_view name() const override { return "rocm_smi"; }
  Status Open(const Target& target) override;
  Status Begin() override;
  Result<std::vector<Sample>> End() override;
  void Close() override;
  std::string warnings() const override { return warnings_; }
  std::string Describe() const override;

 private:
  struct Device {
    RocmSmiDevice id;
    WrappingCounter energy;
    bool energy_ok = false;  // the Begin() read succeeded
    double energy_begin_uj = 0;
    std::string label;  // Sample::device
  };
  void ResolveProcessGpus();
  pid_t pid_ = 0;  // > 0: process mode
  GpuRecheck recheck_;
  std::string sysfs_root_;
  std::unique_ptr<RocmSmiSession> session_;
  std::vector<Device> devices_;
  std::string warnings_;
};

// Energy source over the same counter, summed over every AMD GPU.
class RocmSmiEnergySource : public EnergySource {
 public:
  explicit RocmSmiEnergySource(std::string sysfs_root) : sysfs_root_(std::move(sysfs_root)) {}
  std::string_view name() const override { return "rocm_smi"; }
  Status Open() override;
  Result<double> ReadMicrojoules() override;
  std::string Describe() const override;

 private:
  std::string sysfs_root_;
  std::unique_ptr<RocmSmiSession> session_;
  std::vector<WrappingCounter> counters_;
  double total_uj_ = 0;
};

}  // namespace seqpoint::collectors
