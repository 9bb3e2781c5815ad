// NVML loaded with dlopen: one agent package serves AMD and NVIDIA nodes and builds without
// CUDA. Load() dlopens the configured library (collectors.nvml.library, default
// libnvidia-ml.so.1), resolves every entry point up front and calls nvmlInit_v2; a missing
// library, a missing symbol or a driver that is not loaded is a clean NotFound ("not present
// here"), never a crash. Every read maps NVML's return code to one Status naming the call:
// NVML_ERROR_NOT_SUPPORTED -> Unsupported, NVML_ERROR_GPU_IS_LOST / TIMEOUT / RESET_REQUIRED /
// IRQ_ISSUE -> Unavailable (the device fell off the bus or cannot answer now), NO_PERMISSION ->
// PermissionDenied; the text is NVML's own nvmlErrorString.
//
// Threads: NVML is thread-safe; a NvmlLibrary is used by one thread. nvmlInit/nvmlShutdown are
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
  unsigned index = 0;
  nvmlDevice_t handle = nullptr;
  std::string pci;  // "0000:01:00.0" (lower case, 4-digit domain) or "" when unknown
};

class NvmlLibrary {
 public:
  static Result<std::unique_ptr<NvmlLibrary>> Load(const std::string& library);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const std::vector<NvmlDevice>& devices() const { return devices_; }
  // "" = all, an index ("0") or a PCI address ("0000:01:00.0").
  Result<std::vector<NvmlDevice>> Select(const std::string& device) const;

  Result<uint64_t> TotalEnergyMillijoules(const NvmlDevice& d) const;
  Result<double> PowerWatts(const NvmlDevice& d) const;
  Result<nvmlUtilization_t> Utilization(const NvmlDevice& d) const;
  Result<unsigned> ClockMHz(const NvmlDevice& d, nvmlClockType_t type) const;
  Result<nvmlMemory_t> Memory(const NvmlDevice& d) const;
  // Fills each value's fieldId from `ids`; per-field failures are in each nvmlReturn.
  Result<std::vector<nvmlFieldValue_t>> FieldValues(const NvmlDevice& d,
                                                    const std::vector<int64_t>& ids) const;

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
};

}  // namespace seqpoint::collectors
