// The collector and energy-source tables. The only file of collectors/ that tests
// SEQPOINT_HAVE_* (see registry.h).
#include "collectors/registry.h"

#include "collectors/energy/gpu_metrics_energy.h"
#include "collectors/energy/rapl.h"
#include "collectors/nvml/nvml_collector.h"
#include "collectors/perf/perf_collector.h"
#include "seqpoint/features.h"

#if SEQPOINT_HAVE_PAPI
#include "collectors/papi/papi_collector.h"
#endif
#if SEQPOINT_HAVE_ROCM_SMI
#include "collectors/rocm_smi/rocm_smi_collector.h"
#endif

namespace seqpoint::collectors {
namespace {

// Stands in for a vendor path this build was configured without.
class NotBuiltCollector : public Collector {
 public:
  NotBuiltCollector(std::string_view name, std::string_view option)
      : name_(name), option_(option) {}
  std::string_view name() const override { return name_; }
  Status Open(const Target&) override {
    return Unsupported(std::string(name_) + " is not built into this agent (configured with " +
                       std::string(option_) + "=OFF or without its library)");
  }
  Status Begin() override { return Internal("not built"); }
  Result<std::vector<Sample>> End() override { return Internal("not built"); }
  void Close() override {}

 private:
  std::string_view name_;
  std::string_view option_;
};

class NotBuiltEnergySource : public EnergySource {
 public:
  explicit NotBuiltEnergySource(std::string_view name) : name_(name) {}
  std::string_view name() const override { return name_; }
  Status Open() override { return Unsupported("not built into this agent"); }
  Result<double> ReadMicrojoules() override { return Internal("not built"); }

 private:
  std::string_view name_;
};

std::unique_ptr<Collector> MakePerf(const CollectorConfig& c) {
  return std::make_unique<PerfCollector>(c.perf, c.proc_root);
}

std::unique_ptr<Collector> MakePapi([[maybe_unused]] const CollectorConfig& c) {
#if SEQPOINT_HAVE_PAPI
  return std::make_unique<PapiCollector>(c.papi);
#else
  return std::make_unique<NotBuiltCollector>("papi", "SEQPOINT_WITH_PAPI");
#endif
}

std::unique_ptr<Collector> MakeRocmSmi([[maybe_unused]] const CollectorConfig& c) {
#if SEQPOINT_HAVE_ROCM_SMI
  return std::make_unique<RocmSmiCollector>(c.sysfs_root);
#else
  return std::make_unique<NotBuiltCollector>("rocm_smi", "SEQPOINT_WITH_ROCM_SMI");
#endif
}

std::unique_ptr<Collector> MakeNvml(const CollectorConfig& c) {
  return std::make_unique<NvmlCollector>(c.nvml);
}

std::unique_ptr<Collector> MakeRapl(const CollectorConfig& c) {
  return std::make_unique<RaplCollector>(c.sysfs_root);
}

std::unique_ptr<Collector> MakeEnergy(const CollectorConfig& c) {
  return std::make_unique<EnergyCollector>(c, EnergySourceRegistry());
}

std::unique_ptr<EnergySource> MakeGpuMetricsEnergy(const CollectorConfig& c) {
  return std::make_unique<GpuMetricsEnergySource>(c.sysfs_root);
}

std::unique_ptr<EnergySource> MakeRocmSmiEnergy([[maybe_unused]] const CollectorConfig& c) {
#if SEQPOINT_HAVE_ROCM_SMI
  return std::make_unique<RocmSmiEnergySource>(c.sysfs_root);
#else
  return std::make_unique<NotBuiltEnergySource>("rocm_smi");
#endif
}

std::unique_ptr<EnergySource> MakeNvmlEnergy(const CollectorConfig& c) {
  return std::make_unique<NvmlEnergySource>(c.nvml.library);
}

std::unique_ptr<EnergySource> MakeRaplEnergy(const CollectorConfig& c) {
  return std::make_unique<RaplEnergySource>(c.sysfs_root);
}

}  // namespace

const std::vector<CollectorInfo>& CollectorRegistry() {
  static const std::vector<CollectorInfo> kTable = {
      {"perf", true, "perf_event counters on every thread of the target process", MakePerf},
      {"papi", false, "PAPI event sets of any component (needs collectors.papi.events)", MakePapi},
      {"rocm_smi", true, "AMD GPU energy, power, busy %, clocks, VRAM, temperature", MakeRocmSmi},
      {"nvml", true, "NVIDIA GPU energy, power, utilization, clocks, memory (dlopen)", MakeNvml},
      {"rapl", false, "per-zone RAPL energy from /sys/class/powercap", MakeRapl},
      {"energy", true, "energy_uj from the best energy source present", MakeEnergy},
  };
  return kTable;
}

const std::vector<EnergySourceInfo>& EnergySourceRegistry() {
  static const std::vector<EnergySourceInfo> kTable = {
      {"gpu_metrics", MakeGpuMetricsEnergy},
      {"rocm_smi", MakeRocmSmiEnergy},
      {"nvml", MakeNvmlEnergy},
      {"rapl", MakeRaplEnergy},
  };
  return kTable;
}

bool IsCollectorEnabled(const CollectorInfo& info, const CollectorConfig& config) {
  std::optional<bool> set;
  if (info.name == "perf") set = config.perf.enabled;
  if (info.name == "papi") set = config.papi.enabled;
  if (info.name == "rocm_smi") set = config.rocm_smi.enabled;
  if (info.name == "nvml") set = config.nvml.enabled;
  if (info.name == "rapl") set = config.rapl.enabled;
  if (info.name == "energy") set = config.energy.enabled;
  return set.value_or(info.enabled_by_default);
}

CollectorSet MakeCollectorSet(const CollectorConfig& config) {
  CollectorSet set;
  for (const CollectorInfo& info : CollectorRegistry()) {
    if (IsCollectorEnabled(info, config)) set.Add(info.factory(config));
  }
  return set;
}

}  // namespace seqpoint::collectors
