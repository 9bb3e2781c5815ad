// NVML collector: per NVIDIA GPU, the energy over the window (nvmlDeviceGetTotalEnergyConsumption,
// mJ since driver load, Volta and later), and at End the power, utilization, SM and memory
// clocks, memory in use and any configured field values (collectors.nvml.field_ids).
//
// Which GPUs: for a process (Target::pid > 0, no Target::device) the GPUs on which it holds a
// compute context (collectors/gpu/gpu_process_map.h), matched by UUID; a process with none yet
// is looked up again (at most once a second, at Begin) and, until then, End is Unavailable: it
// is never measured on every GPU. Device-wide (pid 0), Target::device or every GPU.
//
// Energy: only over a window that spans at least 10 updates of the GPU's energy counter, whose
// update period is measured once per GPU and daemon, off the event loop, from the first Open of
// the GPU (nvml_energy_periods.h; nvml_energy_window.h: 100 ms on an H100, so windows of 1 s or
// more); until it is known, and for a shorter window, the energy is left out and named in
// warnings(). Open itself reads no energy counter: it returns in microseconds.
//
// Samples: "nvml:gpu<i>:energy" uJ, ":power" W, ":util_gpu" %, ":util_mem" %, ":sm_clock" MHz,
// ":mem_clock" MHz, ":mem_used" bytes, ":mem_total" bytes (the capacity), ":field<id>" (unit
// "value"), with <i> NVML's index (a name only: the series' device is the GPU's UUID,
// Sample::device); all device samples, energy a delta, the rest gauges. For a process also
// ":proc_mem_used" bytes: the memory it holds on that GPU (usedGpuMemory), a process gauge. On
// Hopper and later also the GPM activity metrics of nvml_gpm.h (sm_active, tensor_active,
// dram_active, ..., over windows of 2 s or more). Under MIG the device is "<uuid>/gi<G>/ci<C>", and
// the device-wide values are the whole GPU's (NVML has no per-instance energy). A value NVML does
// not support on this GPU (utilization under MIG, energy before Volta) is left out and named by
// warnings(); a GPU that falls off the bus (NVML_ERROR_GPU_IS_LOST) leaves its values out; if no
// GPU answers, End fails with NVML's reason.
//
// Threads: one thread drives it (the period measurements run on threads of their own, each
// holding the NvmlLibrary it reads through).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "collectors/collector.h"
#include "collectors/collector_config.h"
#include "collectors/energy/energy_source.h"
#include "collectors/gpu/gpu_process_map.h"
#include "collectors/nvml/nvml_energy_periods.h"
#include "collectors/nvml/nvml_energy_window.h"
#include "collectors/nvml/nvml_gpm.h"
#include "collectors/nvml/nvml_library.h"

namespace seqpoint::collectors {

class NvmlCollector : public Collector {
 public:
  explicit NvmlCollector(NvmlOptions options, NvmlGpm::Options gpm = {});

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
    std::string label;  // Sample::device: the UUID (MIG: "<uuid>/gi<G>/ci<C>")
    WrappingCounter energy;
    bool energy_ok = false;            // Begin read the counter
    bool energy_skipped = false;       // Begin did not read it (EnergyWindowRule::ReadAtBegin)
    Status energy_begin;               // Begin's read, when it failed
    EnergyWindowRule energy_rule;      // which windows' energy is kept (nvml_energy_window.h)
    bool energy_period_known = false;  // energy_rule has the measured period (or why none)
    int64_t begin_ns = -1;             // the window's start (monotonic)
    std::optional<NvmlGpm> gpm;        // Hopper and later (nvml_gpm.h)
    std::string gpm_why_not;           // why not, for Describe()
  };
  void AddDevice(const NvmlDevice& d, std::string label, int gpu_instance);
  // Hands the measured period to the device's rule once it is known (at Begin, so a window's
  // Begin and End see one rule).
  void TakePeriod(Device& d) const;
  // Process mode: the process's GPUs, if it has any now.
  void ResolveProcessGpus();
  void ReadDevice(Device& d, int64_t now_ns, std::vector<Sample>* out, Status* last_error);
  void ReadEnergy(Device& d, int64_t now_ns, const std::string& prefix, std::vector<Sample>* out,
                  Status* last_error);

  NvmlOptions options_;
  NvmlGpm::Options gpm_options_;
  std::shared_ptr<NvmlEnergyPeriods> periods_;  // options_.energy_periods, or its own
  std::shared_ptr<NvmlLibrary> nvml_;           // shared with the period measurements
  std::vector<Device> devices_;
  std::string warnings_;
  pid_t pid_ = 0;  // > 0: process mode
  GpuRecheck recheck_;
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
