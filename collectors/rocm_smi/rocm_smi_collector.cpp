#include "collectors/rocm_smi/rocm_smi_collector.h"

#include <rocm_smi/rocm_smi.h>

#include "common/clock.h"

namespace seqpoint::collectors {
namespace {

// Reads the raw energy accumulator and its resolution (uJ per count).
Result<std::pair<uint64_t, double>> ReadEnergy(uint32_t dev) {
  uint64_t counter = 0, timestamp = 0;
  float resolution = 0;
  rsmi_status_t r = rsmi_dev_energy_count_get(dev, &counter, &resolution, &timestamp);
  if (r == RSMI_STATUS_BUSY) {  // another tool (a profiler) holds the device
    return CountersBusy("rsmi_dev_energy_count_get: " + RsmiErrorText(r));
  }
  if (r != RSMI_STATUS_SUCCESS) {
    return Unavailable("rsmi_dev_energy_count_get: " + RsmiErrorText(r));
  }
  // gpu_metrics marks fields an ASIC does not provide with all ones (kgd_pp_interface.h).
  if (counter == UINT64_MAX || resolution <= 0) {
    return Unsupported("energy accumulator not provided by this GPU's firmware");
  }
  return std::make_pair(counter, static_cast<double>(resolution));
}

std::string Prefix(const RocmSmiDevice& d) { return "rocm_smi:gpu" + std::to_string(d.index); }

// `busy`: set when the library says another tool holds the device (the whole reading is then
// void, and the agent backs off: collector.h, CountersBusy).
void Note(std::string* warnings, bool* busy, const std::string& what, rsmi_status_t r) {
  *warnings += (warnings->empty() ? "" : "; ") + what + ": " + RsmiErrorText(r);
  *busy = *busy || r == RSMI_STATUS_BUSY;
}

}  // namespace

Status RocmSmiCollector::Open(const Target& target) {
  Close();
  Result<std::unique_ptr<RocmSmiSession>> s = RocmSmiSession::Open(sysfs_root_);
  if (!s.ok()) return s.status();
  if (target.pid > 0 && target.device.empty()) {
    session_ = std::move(s).value();
    pid_ = target.pid;
    recheck_ = GpuRecheck();
    ResolveProcessGpus();
    return Status::Ok();
  }
  Result<std::vector<RocmSmiDevice>> selected = (*s)->Select(target.device);
  if (!selected.ok()) return selected.status();
  session_ = std::move(s).value();
  for (const RocmSmiDevice& d : *selected)
    devices_.push_back({d, WrappingCounter(), false, 0, d.pci});
  return Status::Ok();
}

void RocmSmiCollector::ResolveProcessGpus() {
  if (!recheck_.Due(MonotonicNs())) return;
  auto gpus = AmdGpusOf(sysfs_root_, pid_);
  if (!gpus.ok()) {
    if (!IsAbsent(gpus.status())) {
      warnings_ +=
          (warnings_.empty() ? "" : "; ") + ("rocm_smi: which GPUs pid " + std::to_string(pid_) +
                                             " uses: " + gpus.status().message());
    }
    return;
  }
  for (const ProcessGpu& g : *gpus) {
    for (const RocmSmiDevice& d : session_->devices()) {
      bool known = false;
      for (const Device& have : devices_) known = known || have.id.index == d.index;
      if (!known && !g.pci.empty() && d.pci == g.pci) {
        devices_.push_back({d, WrappingCounter(), false, 0, g.id()});
      }
    }
  }
}

Status RocmSmiCollector::Begin() {
  if (!session_) return Internal("rocm_smi: Begin() before a successful Open()");
  if (pid_ > 0 && devices_.empty()) ResolveProcessGpus();
  for (Device& d : devices_) {
    d.energy_ok = false;
    Result<std::pair<uint64_t, double>> e = ReadEnergy(d.id.index);
    if (e.ok()) d.energy_ok = d.energy.Update(e->first).ok();
  }
  return Status::Ok();
}

Result<std::vector<Sample>> RocmSmiCollector::End() {
  if (!session_) return Internal("rocm_smi: End() before a successful Open()");
  if (devices_.empty()) {  // process mode, no GPU yet: never measured on every GPU instead
    return Unavailable("rocm_smi: pid " + std::to_string(pid_) +
                       " has no KFD context on any AMD GPU yet (looked up again at most once a "
                       "second)");
  }
  std::vector<Sample> out;
  warnings_.clear();
  size_t devices_read = 0;
  bool held = false;  // another tool holds a device
  for (Device& d : devices_) {
    const std::string p = Prefix(d.id);
    const size_t before = out.size();
    rsmi_status_t r;

    Result<std::pair<uint64_t, double>> e = ReadEnergy(d.id.index);
    if (!e.ok()) {
      warnings_ += (warnings_.empty() ? "" : "; ") + p + ":energy: " + e.status().message();
      held = held || IsCountersBusy(e.status());
    } else {
      Result<uint64_t> delta = d.energy.Update(e->first);
      if (d.energy_ok && delta.ok()) {
        out.push_back(DeviceSample(p + ":energy", static_cast<double>(*delta) * e->second, "uJ",
                                   SampleKind::kDelta, d.label));
      } else if (!delta.ok()) {
        warnings_ += (warnings_.empty() ? "" : "; ") + p + ":energy: " + delta.status().message();
      }
    }

    uint64_t power_uw = 0;
    if ((r = rsmi_dev_power_ave_get(d.id.index, 0, &power_uw)) == RSMI_STATUS_SUCCESS) {
      out.push_back(DeviceSample(p + ":power", static_cast<double>(power_uw) * 1e-6, "W",
                                 SampleKind::kGauge, d.label));
    } else {
      Note(&warnings_, &held, p + ":power", r);
    }
    uint32_t busy = 0;
    if ((r = rsmi_dev_busy_percent_get(d.id.index, &busy)) == RSMI_STATUS_SUCCESS) {
      out.push_back(
          DeviceSample(p + ":busy", static_cast<double>(busy), "%", SampleKind::kGauge, d.label));
    } else {
      Note(&warnings_, &held, p + ":busy", r);
    }
    const std::pair<rsmi_clk_type_t, const char*> clocks[] = {{RSMI_CLK_TYPE_SYS, ":sclk"},
                                                              {RSMI_CLK_TYPE_MEM, ":mclk"}};
    for (const auto& [type, suffix] : clocks) {
      rsmi_frequencies_t f{};
      r = rsmi_dev_gpu_clk_freq_get(d.id.index, type, &f);
      if (r == RSMI_STATUS_SUCCESS && f.current < f.num_supported &&
          f.current < RSMI_MAX_NUM_FREQUENCIES) {
        out.push_back(DeviceSample(p + suffix, static_cast<double>(f.frequency[f.current]) * 1e-6,
                                   "MHz", SampleKind::kGauge, d.label));
      } else {
        Note(&warnings_, &held, p + suffix,
             r == RSMI_STATUS_SUCCESS ? RSMI_STATUS_UNEXPECTED_DATA : r);
      }
    }
    uint64_t vram = 0;
    if ((r = rsmi_dev_memory_usage_get(d.id.index, RSMI_MEM_TYPE_VRAM, &vram)) ==
        RSMI_STATUS_SUCCESS) {
      out.push_back(DeviceSample(p + ":vram_used", static_cast<double>(vram), "bytes",
                                 SampleKind::kGauge, d.label));
    } else {
      Note(&warnings_, &held, p + ":vram_used", r);
    }
    // The capacity, as NVML's mem_total: what the SL at which the job runs out of GPU memory
    // is reckoned against (agent/runs/run_metrics.cpp).
    uint64_t vram_total = 0;
    if ((r = rsmi_dev_memory_total_get(d.id.index, RSMI_MEM_TYPE_VRAM, &vram_total)) ==
        RSMI_STATUS_SUCCESS) {
      out.push_back(DeviceSample(p + ":vram_total", static_cast<double>(vram_total), "bytes",
                                 SampleKind::kGauge, d.label));
    } else {
      Note(&warnings_, &held, p + ":vram_total", r);
    }
    int64_t temp = 0;
    if ((r = rsmi_dev_temp_metric_get(d.id.index, RSMI_TEMP_TYPE_EDGE, RSMI_TEMP_CURRENT, &temp)) ==
        RSMI_STATUS_SUCCESS) {
      out.push_back(DeviceSample(p + ":temp_edge", static_cast<double>(temp) * 1e-3, "C",
                                 SampleKind::kGauge, d.label));
    } else {
      Note(&warnings_, &held, p + ":temp_edge", r);
    }
    devices_read += out.size() > before;
  }
  if (held) return CountersBusy("rocm_smi: " + warnings_);
  if (devices_read == 0) {
    return Unavailable("rocm_smi: no value could be read from any GPU (" + warnings_ +
                       "); the device may have gone away");
  }
  return out;
}

void RocmSmiCollector::Close() {
  devices_.clear();
  pid_ = 0;
  session_.reset();
}

std::string RocmSmiCollector::Describe() const {
  std::string d = "rocm_smi:";
  for (const Device& dev : devices_) d += " gpu" + std::to_string(dev.id.index) + "=" + dev.id.pci;
  return d;
}

Status RocmSmiEnergySource::Open() {
  Result<std::unique_ptr<RocmSmiSession>> s = RocmSmiSession::Open(sysfs_root_);
  if (!s.ok()) return s.status();
  // Present only if every GPU reports an energy counter: a partial sum would be a wrong number.
  for (const RocmSmiDevice& d : (*s)->devices()) {
    Result<std::pair<uint64_t, double>> e = ReadEnergy(d.index);
    if (!e.ok()) return Unsupported("gpu" + std::to_string(d.index) + ": " + e.status().message());
  }
  session_ = std::move(s).value();
  counters_.assign(session_->devices().size(), WrappingCounter());
  total_uj_ = 0;
  return Status::Ok();
}

Result<double> RocmSmiEnergySource::ReadMicrojoules() {
  if (!session_) return Internal("rocm_smi energy: read before Open()");
  const auto& devs = session_->devices();
  for (size_t i = 0; i < devs.size(); ++i) {
    Result<std::pair<uint64_t, double>> e = ReadEnergy(devs[i].index);
    if (!e.ok()) return e.status().WithContext("gpu" + std::to_string(devs[i].index));
    Result<uint64_t> delta = counters_[i].Update(e->first);
    if (!delta.ok()) return delta.status().WithContext("gpu" + std::to_string(devs[i].index));
    total_uj_ += static_cast<double>(*delta) * e->second;
  }
  return total_uj_;
}

std::string RocmSmiEnergySource::Describe() const {
  return "rocm_smi energy counter of " + std::to_string(session_ ? session_->devices().size() : 0) +
         " AMD GPU(s)";
}

}  // namespace seqpoint::collectors
