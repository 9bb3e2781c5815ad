// RAPL energy through the powercap sysfs interface (drivers/powercap/intel_rapl_common.c; AMD
// Zen packages use the same driver and names): <sysfs>/class/powercap/intel-rapl:<p> are the
// packages ("package-N", or "psys" for the platform), intel-rapl:<p>:<s> their sub-zones
// ("core", "uncore", "dram"). Each energy_uj counts up to max_energy_range_uj and wraps to 0;
// WrappingCounter corrects that. energy_uj is root-only since Linux 5.10 (CVE-2020-8694):
// reading it as another user is PermissionDenied, which names the fix.
//
// Node energy (RaplEnergySource) = the packages + their dram sub-zones. Not core/uncore (they
// are parts of the package), not psys (it contains the packages), not intel-rapl-mmio:* (the
// same package counter through MMIO on Intel client parts).
//
// Threads: one thread drives each object.
#pragma once

#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/energy/energy_source.h"
#include "collectors/file_root.h"

namespace seqpoint::collectors {

struct RaplZone {
  std::string dir;   // "class/powercap/intel-rapl:0:0", relative to the sysfs root
  std::string name;  // "package-0/core": the parent's name for sub-zones
  uint64_t max_range_uj = 0;
  bool in_node_total = false;  // counted by RaplEnergySource
};

// Zones under <sysfs_root>/class/powercap. NotFound when there is none (VMs, non-x86).
Result<std::vector<RaplZone>> DiscoverRaplZones(const FileRoot& sys);

class RaplEnergySource : public EnergySource {
 public:
  explicit RaplEnergySource(std::string sysfs_root) : sys_(std::move(sysfs_root)) {}
  std::string_view name() const override { return "rapl"; }
  Status Open() override;
  Result<double> ReadMicrojoules() override;
  std::string Describe() const override;

 private:
  FileRoot sys_;
  std::vector<RaplZone> zones_;  // in_node_total only
  std::vector<WrappingCounter> counters_;
  double total_uj_ = 0;
};

// Per-zone RAPL energy over the window: "rapl:<zone>" in uJ (collectors.rapl).
class RaplCollector : public Collector {
 public:
  explicit RaplCollector(std::string sysfs_root) : sys_(std::move(sysfs_root)) {}
  std::string_view name() const override { return "rapl"; }
  Status Open(const Target& target) override;
  Status Begin() override;
  Result<std::vector<Sample>> End() override;
  void Close() override { zones_.clear(); }
  std::string warnings() const override { return warnings_; }
  std::string Describe() const override;

 private:
  struct Zone {
    RaplZone zone;
    WrappingCounter counter;
    bool began = false;
  };
  FileRoot sys_;
  std::vector<Zone> zones_;
  std::string warnings_;
};

}  // namespace seqpoint::collectors
