#include "collectors/energy/rapl.h"

#include <algorithm>

namespace seqpoint::collectors {
namespace {

constexpr char kPowercap[] = "class/powercap";

// "intel-rapl:0" -> 1 colon (package), "intel-rapl:0:2" -> 2 (sub-zone); else 0.
int RaplDepth(const std::string& entry) {
  if (entry.rfind("intel-rapl:", 0) != 0) return 0;
  return static_cast<int>(std::count(entry.begin(), entry.end(), ':'));
}

}  // namespace

Result<std::vector<RaplZone>> DiscoverRaplZones(const FileRoot& sys) {
  Result<std::vector<std::string>> entries = sys.ListDir(kPowercap);
  if (!entries.ok()) {
    return NotFound("no RAPL powercap interface: " + entries.status().message());
  }
  std::vector<RaplZone> zones;
  for (const std::string& e : *entries) {
    const int depth = RaplDepth(e);
    if (depth != 1 && depth != 2) continue;
    const std::string dir = std::string(kPowercap) + "/" + e;
    Result<std::string> name = sys.ReadString(dir + "/name");
    Result<uint64_t> range = sys.ReadUint64(dir + "/max_energy_range_uj");
    if (!name.ok() || !range.ok()) continue;  // not an energy zone
    RaplZone z;
    z.dir = dir;
    z.max_range_uj = *range;
    if (depth == 1) {
      z.name = *name;
      z.in_node_total = name->rfind("package", 0) == 0;
    } else {
      const std::string parent = e.substr(0, e.rfind(':'));
      Result<std::string> pname = sys.ReadString(std::string(kPowercap) + "/" + parent + "/name");
      z.name = (pname.ok() ? *pname : parent) + "/" + *name;
      z.in_node_total = *name == "dram";
    }
    zones.push_back(z);
  }
  if (zones.empty()) return NotFound("no RAPL zone under " + sys.Path(kPowercap));
  return zones;
}

Status RaplEnergySource::Open() {
  Result<std::vector<RaplZone>> zones = DiscoverRaplZones(sys_);
  if (!zones.ok()) return zones.status();
  zones_.clear();
  for (const RaplZone& z : *zones) {
    if (z.in_node_total) zones_.push_back(z);
  }
  if (zones_.empty()) return NotFound("RAPL has no package zone under " + sys_.Path(kPowercap));
  counters_.clear();
  for (const RaplZone& z : zones_) {
    // The first read proves that energy_uj is readable (root-only since Linux 5.10).
    Result<uint64_t> v = sys_.ReadUint64(z.dir + "/energy_uj");
    if (!v.ok()) return v.status().WithContext("RAPL zone " + z.name);
    counters_.emplace_back(z.max_range_uj);
  }
  total_uj_ = 0;
  return Status::Ok();
}

Result<double> RaplEnergySource::ReadMicrojoules() {
  if (zones_.empty()) return Internal("rapl: read before Open()");
  for (size_t i = 0; i < zones_.size(); ++i) {
    Result<uint64_t> v = sys_.ReadUint64(zones_[i].dir + "/energy_uj");
    if (!v.ok()) return v.status();
    Result<uint64_t> delta = counters_[i].Update(*v);
    if (!delta.ok()) return delta.status().WithContext("RAPL zone " + zones_[i].name);
    total_uj_ += static_cast<double>(*delta);
  }
  return total_uj_;
}

std::string RaplEnergySource::Describe() const {
  std::string d = "rapl:";
  for (const RaplZone& z : zones_) d += " " + z.name;
  return d;
}

Status RaplCollector::Open(const Target&) {
  Result<std::vector<RaplZone>> zones = DiscoverRaplZones(sys_);
  if (!zones.ok()) return zones.status();
  zones_.clear();
  for (const RaplZone& z : *zones) {
    Result<uint64_t> v = sys_.ReadUint64(z.dir + "/energy_uj");
    if (!v.ok()) {
      Status s = v.status().WithContext("RAPL zone " + z.name);
      zones_.clear();
      return s;
    }
    zones_.push_back({z, WrappingCounter(z.max_range_uj), false});
  }
  return Status::Ok();
}

Status RaplCollector::Begin() {
  for (Zone& z : zones_) {
    Result<uint64_t> v = sys_.ReadUint64(z.zone.dir + "/energy_uj");
    z.began = v.ok() && z.counter.Update(*v).ok();
  }
  return Status::Ok();
}

Result<std::vector<Sample>> RaplCollector::End() {
  std::vector<Sample> out;
  warnings_.clear();
  for (Zone& z : zones_) {
    Result<uint64_t> v = sys_.ReadUint64(z.zone.dir + "/energy_uj");
    Status problem = v.status();
    if (v.ok()) {
      Result<uint64_t> delta = z.counter.Update(*v);
      if (delta.ok() && z.began) {
        out.push_back(DeviceSample("rapl:" + z.zone.name, static_cast<double>(*delta), "uJ",
                                   SampleKind::kDelta, "rapl:" + z.zone.name));
        continue;
      }
      problem = delta.ok() ? Unavailable("no reading at Begin()") : delta.status();
    }
    warnings_ += (warnings_.empty() ? "" : "; ") + z.zone.name + ": " + problem.message();
  }
  if (out.empty() && !zones_.empty())
    return Unavailable("rapl: no zone could be read: " + warnings_);
  return out;
}

std::string RaplCollector::Describe() const {
  std::string d = "rapl:";
  for (const Zone& z : zones_) d += " " + z.zone.name;
  return d;
}

}  // namespace seqpoint::collectors
