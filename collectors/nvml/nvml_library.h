// NVML loaded with dlopen: one agent package serves AMD and NVIDIA nodes and builds without
// CUDA. Load() dlopens the configured library (collectors.nvml.library, default
// libnvidia-ml.so.1), resolves every entry point up front and calls nvmlInit_v2; a missing
// library, a missing symbol or a driver that is not loaded is a clean NotFound ("not present
// here"), never a crash. Every read maps NVML's return code to one Status naming the call:
// NVML_ERROR_NOT_SUPPORTED -> Unsupported, NVML_ERROR_GPU_IS_LOST / TIMEOUT / RESET_REQUIRED /
// IRQ_ISSUE -> Unavailable (the device fell off the bus or cannot answer now), NO_PERMISSION ->
// PermissionDenied; the text is NVML's own nvmlErrorString.
//
// Threads: NVML is thread-safe and the reads here are const: a collector's thread and the
// measurement of its GPUs' energy-counter periods (nvml_energy_periods.h) read through one
// NvmlLibrary, held by a shared_ptr until both are done. nvmlInit/nvmlShutdown are
// reference-counted by NVML, so a collector and an energy source may each hold one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectors/nvml/nvml_api.h"
#include "common/status.h"

namespace seqpoint::collectors {

struct NvmlDevice {
  unsigned index = 0;  // NVML's enumeration order: not CUDA's ordinal, not the minor number
  nvmlDevice_t handle = nullptr;
  std::string pci;   // "0000:01:00.0" (lower case, 4-digit domain) or "" when unknown
  std::string uuid;  // "GPU-..." or "" when this NVML lacks nvmlDeviceGetUUID
  std::string name;  // "NVIDIA H100 80GB HBM3", or "" when unknown
  // The stable id series carry: the UUID, else the PCI bus id, else "nvml<index>".
  std::string id() const {
    return !uuid.empty() ? uuid : !pci.empty() ? pci : "nvml" + std::to_string(index);
  }
};

class NvmlLibrary {
 public:
  static Result<std::unique_ptr<NvmlLibrary>> Load(const std::string& library);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const std::vector<NvmlDevice>& devices() const { return devices_; }
  // "" = all, an index ("0"), a PCI address ("0000:01:00.0") or a UUID ("GPU-...").
  Result<std::vector<NvmlDevice>> Select(const std::string& device) const;

  Result<uint64_t> TotalEnergyMillijoules(const NvmlDevice& d) const;
  Result<double> PowerWatts(const NvmlDevice& d) const;
  Result<nvmlUtilization_t> Utilization(const NvmlDevice& d) const;
  Result<unsigned> ClockMHz(const NvmlDevice& d, nvmlClockType_t type) const;
  Result<nvmlMemory_t> Memory(const NvmlDevice& d) const;
  // Fills each value's fieldId from `ids`; per-field failures are in each nvmlReturn.
  Result<std::vector<nvmlFieldValue_t>> FieldValues(const NvmlDevice& d,
                                                    const std::vector<int64_t>& ids) const;

  // Processes with a compute context on the device (nvmlDeviceGetComputeRunningProcesses_v3):
  // host pids, MIG instance ids. Unsupported when this NVML lacks the _v3 entry point.
  Result<std::vector<nvmlProcessInfo_t>> ComputeProcesses(const NvmlDevice& d) const;

  // GPM (nvml_api.h). gpm_symbols(): this NVML has the five GPM entry points; without them
  // each call is Unsupported, naming the driver's missing symbol.
  bool gpm_symbols() const { return gpm_metrics_get_ != nullptr; }
  Result<bool> GpmSupported(const NvmlDevice& d) const;
  Result<nvmlGpmSample_t> GpmSampleAlloc() const;
  void GpmSampleFree(nvmlGpmSample_t s) const;
  // gpu_instance < 0: the whole device (or a MIG device handle); else that MIG GPU instance.
  Status GpmSampleGet(const NvmlDevice& d, int gpu_instance, nvmlGpmSample_t s) const;
  Status GpmMetricsGet(nvmlGpmMetricsGet_t* request) const;

  std::string ErrorText(nvmlReturn_t r) const;
  const std::string& path() const { return path_; }

 private:
  NvmlLibrary() = default;
  Status Check(nvmlReturn_t r, const char* call, const NvmlDevice* d) const;

  void* handle_ = nullptr;
  std::string path_;
  bool initialized_ = false;
  std::vector<NvmlDevice> devices_;

  nvmlInit_v2_fn init_ = nullptr;
  nvmlShutdown_fn shutdown_ = nullptr;
  nvmlErrorString_fn error_string_ = nullptr;
  nvmlDeviceGetCount_v2_fn get_count_ = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn get_handle_ = nullptr;
  nvmlDeviceGetPciInfo_v3_fn get_pci_ = nullptr;  // optional
  nvmlDeviceGetTotalEnergyConsumption_fn get_energy_ = nullptr;
  nvmlDeviceGetPowerUsage_fn get_power_ = nullptr;
  nvmlDeviceGetUtilizationRates_fn get_utilization_ = nullptr;
  nvmlDeviceGetClockInfo_fn get_clock_ = nullptr;
  nvmlDeviceGetMemoryInfo_fn get_memory_ = nullptr;
  nvmlDeviceGetFieldValues_fn get_fields_ = nullptr;
  // Optional entry points.
  nvmlDeviceGetUUID_fn get_uuid_ = nullptr;
  nvmlDeviceGetName_fn get_name_ = nullptr;
  nvmlDeviceGetComputeRunningProcesses_v3_fn get_processes_ = nullptr;
  nvmlGpmQueryDeviceSupport_fn gpm_query_ = nullptr;
  nvmlGpmSampleAlloc_fn gpm_alloc_ = nullptr;
  nvmlGpmSampleFree_fn gpm_free_ = nullptr;
  nvmlGpmSampleGet_fn gpm_sample_ = nullptr;
  nvmlGpmMigSampleGet_fn gpm_mig_sample_ = nullptr;
  nvmlGpmMetricsGet_fn gpm_metrics_get_ = nullptr;
};

}  // namespace seqpoint::collectors
