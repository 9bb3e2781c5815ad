#include "collectors/nvml/nvml_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "collectors/collector.h"

namespace seqpoint::collectors {
namespace {

template <typename Fn>
bool Resolve(void* handle, const char* symbol, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, symbol));
  return *out != nullptr;
}

// "00000000:01:00.0" (NVML's 8-digit domain, upper case) -> "0000:01:00.0".
std::string NormalizePci(const char* bus_id) {
  std::string s(bus_id);
  if (s.size() == 16 && s.compare(0, 4, "0000") == 0) s = s.substr(4);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& library) {
  auto lib = std::unique_ptr<NvmlLibrary>(new NvmlLibrary());
  lib->path_ = library;
  dlerror();
  lib->handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* err = dlerror();
    return NotFound(
        "NVML not present: dlopen(" + library + "): " + (err ? err : "failed") +
        " (no NVIDIA driver here: nothing to do on a node without NVIDIA GPUs; on one with "
        "them, install the driver or set collectors.nvml.library)");
  }
  struct Required {
    const char* symbol;
    bool ok;
  };
  const Required required[] = {
      {"nvmlInit_v2", Resolve(lib->handle_, "nvmlInit_v2", &lib->init_)},
      {"nvmlShutdown", Resolve(lib->handle_, "nvmlShutdown", &lib->shutdown_)},
      {"nvmlErrorString", Resolve(lib->handle_, "nvmlErrorString", &lib->error_string_)},
      {"nvmlDeviceGetCount_v2", Resolve(lib->handle_, "nvmlDeviceGetCount_v2", &lib->get_count_)},
      {"nvmlDeviceGetHandleByIndex_v2",
       Resolve(lib->handle_, "nvmlDeviceGetHandleByIndex_v2", &lib->get_handle_)},
      {"nvmlDeviceGetTotalEnergyConsumption",
       Resolve(lib->handle_, "nvmlDeviceGetTotalEnergyConsumption", &lib->get_energy_)},
      {"nvmlDeviceGetPowerUsage",
       Resolve(lib->handle_, "nvmlDeviceGetPowerUsage", &lib->get_power_)},
      {"nvmlDeviceGetUtilizationRates",
       Resolve(lib->handle_, "nvmlDeviceGetUtilizationRates", &lib->get_utilization_)},
      {"nvmlDeviceGetClockInfo", Resolve(lib->handle_, "nvmlDeviceGetClockInfo", &lib->get_clock_)},
      {"nvmlDeviceGetMemoryInfo",
       Resolve(lib->handle_, "nvmlDeviceGetMemoryInfo", &lib->get_memory_)},
      {"nvmlDeviceGetFieldValues",
       Resolve(lib->handle_, "nvmlDeviceGetFieldValues", &lib->get_fields_)},
  };
  for (const Required& r : required) {
    if (!r.ok) {
      return NotFound("NVML at " + library + " lacks " + r.symbol + " (driver older than R450?)");
    }
  }
  Resolve(lib->handle_, "nvmlDeviceGetPciInfo_v3", &lib->get_pci_);
  Resolve(lib->handle_, "nvmlDeviceGetUUID", &lib->get_uuid_);
  Resolve(lib->handle_, "nvmlDeviceGetName", &lib->get_name_);
  Resolve(lib->handle_, "nvmlDeviceGetComputeRunningProcesses_v3", &lib->get_processes_);
  // GPM: all five or none (a driver before R520 has none).
  bool gpm = Resolve(lib->handle_, "nvmlGpmQueryDeviceSupport", &lib->gpm_query_);
  gpm = Resolve(lib->handle_, "nvmlGpmSampleAlloc", &lib->gpm_alloc_) && gpm;
  gpm = Resolve(lib->handle_, "nvmlGpmSampleFree", &lib->gpm_free_) && gpm;
  gpm = Resolve(lib->handle_, "nvmlGpmSampleGet", &lib->gpm_sample_) && gpm;
  gpm = Resolve(lib->handle_, "nvmlGpmMetricsGet", &lib->gpm_metrics_get_) && gpm;
  Resolve(lib->handle_, "nvmlGpmMigSampleGet", &lib->gpm_mig_sample_);  // NVML 12.0+
  if (!gpm) lib->gpm_metrics_get_ = nullptr;

  nvmlReturn_t r = lib->init_();
  if (r != NVML_SUCCESS) {
    return NotFound("NVML present but nvmlInit_v2 failed: " + lib->ErrorText(r) +
                    " (is the NVIDIA kernel driver loaded?)");
  }
  lib->initialized_ = true;
  unsigned count = 0;
  r = lib->get_count_(&count);
  if (r != NVML_SUCCESS) return lib->Check(r, "nvmlDeviceGetCount_v2", nullptr);
  if (count == 0) return NotFound("NVML lists no NVIDIA GPU");
  for (unsigned i = 0; i < count; ++i) {
    NvmlDevice d;
    d.index = i;
    r = lib->get_handle_(i, &d.handle);
    if (r != NVML_SUCCESS) continue;  // a GPU NVML cannot open (e.g. lost): skip it
    nvmlPciInfo_t pci{};
    if (lib->get_pci_ && lib->get_pci_(d.handle, &pci) == NVML_SUCCESS) {
      pci.busId[sizeof pci.busId - 1] = '\0';
      d.pci = NormalizePci(pci.busId);
    }
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (lib->get_uuid_ && lib->get_uuid_(d.handle, text, sizeof text) == NVML_SUCCESS) {
      text[sizeof text - 1] = '\0';
      d.uuid = text;
    }
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (lib->get_name_ && lib->get_name_(d.handle, name, sizeof name) == NVML_SUCCESS) {
      name[sizeof name - 1] = '\0';
      d.name = name;
    }
    lib->devices_.push_back(d);
  }
  if (lib->devices_.empty()) return Unavailable("NVML lists GPUs but none can be opened");
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_ && shutdown_) shutdown_();
  if (handle_) dlclose(handle_);
}

std::string NvmlLibrary::ErrorText(nvmlReturn_t r) const {
  const char* text = error_string_ ? error_string_(r) : nullptr;
  return std::string(text ? text : "NVML error") + " (nvmlReturn " + std::to_string(r) + ")";
}

Status NvmlLibrary::Check(nvmlReturn_t r, const char* call, const NvmlDevice* d) const {
  if (r == NVML_SUCCESS) return Status::Ok();
  std::string m =
      std::string(call) + (d ? " on gpu" + std::to_string(d->index) : "") + ": " + ErrorText(r);
  switch (r) {
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return Unsupported(m);
    case NVML_ERROR_NO_PERMISSION:
      return PermissionDenied(m);
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_TIMEOUT:
    case NVML_ERROR_RESET_REQUIRED:
    case NVML_ERROR_IRQ_ISSUE:
    case NVML_ERROR_NO_DATA:
      return Unavailable(m);
    case NVML_ERROR_IN_USE:  // another tool (a profiler) holds the counters
      return CountersBusy(m);
    case NVML_ERROR_NOT_FOUND:
      return NotFound(m);
    default:
      return IoError(m);
  }
}

Result<std::vector<NvmlDevice>> NvmlLibrary::Select(const std::string& device) const {
  if (device.empty()) return devices_;
  for (const NvmlDevice& d : devices_) {
    if (device == std::to_string(d.index) || (!d.pci.empty() && device == d.pci) ||
        (!d.uuid.empty() && device == d.uuid)) {
      return std::vector<NvmlDevice>{d};
    }
  }
  return NotFound("no NVIDIA GPU '" + device + "' here (" + std::to_string(devices_.size()) +
                  " device(s))");
}

Result<uint64_t> NvmlLibrary::TotalEnergyMillijoules(const NvmlDevice& d) const {
  unsigned long long mj = 0;
  Status s = Check(get_energy_(d.handle, &mj), "nvmlDeviceGetTotalEnergyConsumption", &d);
  if (!s.ok()) return s;
  return static_cast<uint64_t>(mj);
}

Result<double> NvmlLibrary::PowerWatts(const NvmlDevice& d) const {
  unsigned mw = 0;
  Status s = Check(get_power_(d.handle, &mw), "nvmlDeviceGetPowerUsage", &d);
  if (!s.ok()) return s;
  return mw * 1e-3;
}

Result<nvmlUtilization_t> NvmlLibrary::Utilization(const NvmlDevice& d) const {
  nvmlUtilization_t u{};
  Status s = Check(get_utilization_(d.handle, &u), "nvmlDeviceGetUtilizationRates", &d);
  if (!s.ok()) return s;
  return u;
}

Result<unsigned> NvmlLibrary::ClockMHz(const NvmlDevice& d, nvmlClockType_t type) const {
  unsigned mhz = 0;
  Status s = Check(get_clock_(d.handle, type, &mhz), "nvmlDeviceGetClockInfo", &d);
  if (!s.ok()) return s;
  return mhz;
}

Result<nvmlMemory_t> NvmlLibrary::Memory(const NvmlDevice& d) const {
  nvmlMemory_t m{};
  Status s = Check(get_memory_(d.handle, &m), "nvmlDeviceGetMemoryInfo", &d);
  if (!s.ok()) return s;
  return m;
}

Result<std::vector<nvmlFieldValue_t>> NvmlLibrary::FieldValues(
    const NvmlDevice& d, const std::vector<int64_t>& ids) const {
  std::vector<nvmlFieldValue_t> values(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) values[i].fieldId = static_cast<unsigned>(ids[i]);
  if (values.empty()) return values;
  Status s = Check(get_fields_(d.handle, static_cast<int>(values.size()), values.data()),
                   "nvmlDeviceGetFieldValues", &d);
  if (!s.ok()) return s;
  return values;
}

Result<std::vector<nvmlProcessInfo_t>> NvmlLibrary::ComputeProcesses(const NvmlDevice& d) const {
  if (get_processes_ == nullptr) {
    return Unsupported("NVML at " + path_ +
                       " lacks nvmlDeviceGetComputeRunningProcesses_v3 (driver older than R510): "
                       "which GPU a process uses is unknown");
  }
  // Size, then read; processes come and go between the calls, so retry a few times with room.
  unsigned count = 0;
  std::vector<nvmlProcessInfo_t> infos;
  for (int attempt = 0; attempt < 4; ++attempt) {
    infos.assign(count, nvmlProcessInfo_t{});
    unsigned n = count;
    nvmlReturn_t r = get_processes_(d.handle, &n, infos.empty() ? nullptr : infos.data());
    if (r == NVML_SUCCESS) {
      infos.resize(std::min<size_t>(n, infos.size()));
      return infos;
    }
    if (r != NVML_ERROR_INSUFFICIENT_SIZE) {
      return Check(r, "nvmlDeviceGetComputeRunningProcesses_v3", &d);
    }
    count = n + 8;
  }
  return Unavailable("nvmlDeviceGetComputeRunningProcesses_v3 on gpu" + std::to_string(d.index) +
                     ": the process list kept growing while read");
}

namespace {
Status NoGpm(const std::string& path) {
  return Unsupported("NVML at " + path +
                     " has no GPM entry points (nvmlGpmMetricsGet: driver older than R520)");
}
}  // namespace

Result<bool> NvmlLibrary::GpmSupported(const NvmlDevice& d) const {
  if (!gpm_symbols()) return NoGpm(path_);
  nvmlGpmSupport_t support{};
  support.version = NVML_GPM_SUPPORT_VERSION;  // the raw 1, not NVML_STRUCT_VERSION
  nvmlReturn_t r = gpm_query_(d.handle, &support);
  if (r == NVML_ERROR_NOT_SUPPORTED) return false;
  Status s = Check(r, "nvmlGpmQueryDeviceSupport", &d);
  if (!s.ok()) return s;
  return support.isSupportedDevice != 0;
}

Result<nvmlGpmSample_t> NvmlLibrary::GpmSampleAlloc() const {
  if (!gpm_symbols()) return NoGpm(path_);
  nvmlGpmSample_t s = nullptr;
  Status st = Check(gpm_alloc_(&s), "nvmlGpmSampleAlloc", nullptr);
  if (!st.ok()) return st;
  return s;
}

void NvmlLibrary::GpmSampleFree(nvmlGpmSample_t s) const {
  if (gpm_free_ != nullptr && s != nullptr) gpm_free_(s);
}

Status NvmlLibrary::GpmSampleGet(const NvmlDevice& d, int gpu_instance, nvmlGpmSample_t s) const {
  if (!gpm_symbols()) return NoGpm(path_);
  if (gpu_instance < 0) return Check(gpm_sample_(d.handle, s), "nvmlGpmSampleGet", &d);
  if (gpm_mig_sample_ == nullptr) {
    return Unsupported("NVML at " + path_ + " lacks nvmlGpmMigSampleGet (NVML before 12.0)");
  }
  return Check(gpm_mig_sample_(d.handle, static_cast<unsigned>(gpu_instance), s),
               "nvmlGpmMigSampleGet", &d);
}

Status NvmlLibrary::GpmMetricsGet(nvmlGpmMetricsGet_t* request) const {
  if (!gpm_symbols()) return NoGpm(path_);
  return Check(gpm_metrics_get_(request), "nvmlGpmMetricsGet", nullptr);
}

}  // namespace seqpoint::collectors
