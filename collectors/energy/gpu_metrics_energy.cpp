#include "collectors/energy/gpu_metrics_energy.h"

#include <filesystem>

namespace seqpoint::collectors {

Status GpuMetricsEnergySource::Open() {
  devices_.clear();
  accumulators_.clear();
  layouts_.clear();
  total_uj_ = 0;
  const std::filesystem::path sys(sysfs_root_);
  const std::filesystem::path clean = sys.has_filename() ? sys : sys.parent_path();
  if (clean.filename() != "sys") {
    return NotFound("gpu_metrics energy: collectors.sysfs_root '" + sysfs_root_ +
                    "' does not end in /sys (the firmware-shim reads <root>/sys/class/drm)");
  }
  Result<std::vector<firmware::GpuDevice>> found =
      firmware::DiscoverGpus(firmware::SysfsRoot(clean.parent_path().string()));
  if (!found.ok()) return NotFound("gpu_metrics energy: " + found.status().message());
  for (firmware::GpuDevice& d : *found) {
    if (!d.has_gpu_metrics()) continue;
    Result<firmware::GpuMetrics> m = d.ReadGpuMetrics();
    if (!m.ok()) {
      return Unsupported("gpu_metrics energy: " + d.card() + ": " + m.status().message());
    }
    if (!m->energy_accumulator) {
      return Unsupported("gpu_metrics energy: " + d.card() + "'s table (" + m->layout +
                         ") has no energy accumulator");
    }
    accumulators_.emplace_back(m->energy_counter_bits, m->energy_joules_per_count);
    accumulators_.back().Add(*m->energy_accumulator);  // baseline
    layouts_ += (layouts_.empty() ? "" : ", ") + d.card() + " " + m->layout;
    devices_.push_back(std::move(d));
  }
  if (devices_.empty()) return NotFound("gpu_metrics energy: no AMD GPU with a gpu_metrics table");
  return Status::Ok();
}

Result<double> GpuMetricsEnergySource::ReadMicrojoules() {
  if (devices_.empty()) return Internal("gpu_metrics energy: read before Open()");
  Status void_read;
  for (size_t i = 0; i < devices_.size(); ++i) {
    Result<firmware::GpuMetrics> m = devices_[i].ReadGpuMetrics();
    if (!m.ok()) return m.status().WithContext(devices_[i].card());
    if (!m->energy_accumulator) {
      return Unavailable(devices_[i].card() + ": gpu_metrics lost its energy accumulator");
    }
    firmware::EnergyAccumulator::Update u = accumulators_[i].Add(*m->energy_accumulator);
    if (u.kind == firmware::EnergyAccumulator::Kind::kReset) {
      // Keep feeding the other devices so every baseline moves, then void this read.
      void_read = Unavailable(devices_[i].card() +
                              ": energy accumulator reset (driver reload or GPU reset); "
                              "re-based");
      continue;
    }
    if (u.delta_joules) total_uj_ += *u.delta_joules * 1e6;
  }
  if (!void_read.ok()) return void_read;
  return total_uj_;
}

std::string GpuMetricsEnergySource::Describe() const {
  return "gpu_metrics energy accumulator (" + layouts_ + ")";
}

}  // namespace seqpoint::collectors
