#include "collectors/nvml/nvml_collector.h"

#include <algorithm>

#include "common/clock.h"

namespace seqpoint::collectors {
namespace {

double FieldAsDouble(const nvmlFieldValue_t& f) {
  switch (f.valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
      return f.value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      return f.value.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return static_cast<double>(f.value.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return static_cast<double>(f.value.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      return static_cast<double>(f.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT:
      return f.value.siVal;
  }
  return 0;
}

void Warn(std::string* w, const std::string& what, const Status& s) {
  *w += (w->empty() ? "" : "; ") + what + ": " + s.message();
}

}  // namespace

NvmlCollector::NvmlCollector(NvmlOptions options, NvmlGpm::Options gpm)
    : options_(std::move(options)),
      gpm_options_(gpm),
      periods_(options_.energy_periods ? options_.energy_periods : MakeNvmlEnergyPeriods()) {}

Status NvmlCollector::Open(const Target& target) {
  Close();
  Result<std::unique_ptr<NvmlLibrary>> lib = NvmlLibrary::Load(options_.library);
  if (!lib.ok()) return lib.status();
  if (target.pid > 0 && target.device.empty()) {
    nvml_ = std::move(lib).value();
    pid_ = target.pid;
    recheck_ = GpuRecheck();
    ResolveProcessGpus();
    return Status::Ok();
  }
  Result<std::vector<NvmlDevice>> selected = (*lib)->Select(target.device);
  if (!selected.ok()) return selected.status();
  nvml_ = std::move(lib).value();
  for (const NvmlDevice& d : *selected) AddDevice(d, d.id(), -1);
  return Status::Ok();
}

void NvmlCollector::AddDevice(const NvmlDevice& d, std::string label, int gpu_instance) {
  Device dev;
  dev.id = d;
  dev.label = std::move(label);
  // The energy counter's update period: measured once per GPU and daemon, on its own thread.
  periods_->Start(nvml_, d);
  TakePeriod(dev);
  auto gpm = NvmlGpm::Open(nvml_.get(), d, gpu_instance, gpm_options_);
  if (gpm.ok()) {
    dev.gpm = std::move(gpm).value();
  } else {
    dev.gpm_why_not = gpm.status().message();
  }
  devices_.push_back(std::move(dev));
}

void NvmlCollector::TakePeriod(Device& d) const {
  if (d.energy_period_known) return;
  if (std::optional<UpdatePeriod> p = periods_->Get(d.id.id())) {
    d.energy_rule.set_period(std::move(*p));
    d.energy_period_known = true;
  }
}

void NvmlCollector::ResolveProcessGpus() {
  if (!recheck_.Due(MonotonicNs())) return;
  std::string lookup_warnings;
  auto gpus = NvidiaGpusOf(*nvml_, pid_, &lookup_warnings);
  if (!gpus.ok()) {
    Warn(&warnings_, "nvml: which GPUs pid " + std::to_string(pid_) + " uses", gpus.status());
    return;
  }
  if (!lookup_warnings.empty()) warnings_ += (warnings_.empty() ? "" : "; ") + lookup_warnings;
  for (const ProcessGpu& g : *gpus) {
    bool known = false;
    for (const Device& d : devices_) known = known || d.label == g.id();
    if (known) continue;
    for (const NvmlDevice& d : nvml_->devices()) {
      if (d.index == g.nvml_index) {
        AddDevice(d, g.id(), g.mig() ? static_cast<int>(g.gpu_instance) : -1);
      }
    }
  }
}

Status NvmlCollector::Begin() {
  if (!nvml_) return Internal("nvml: Begin() before a successful Open()");
  warnings_.clear();
  if (pid_ > 0 && devices_.empty()) ResolveProcessGpus();
  const int64_t now = MonotonicNs();
  for (Device& d : devices_) {
    d.begin_ns = now;
    d.energy_ok = false;
    TakePeriod(d);
    // Not read when every recent window was too short to keep its energy: ~3 ms saved a read.
    d.energy_skipped = !d.energy_rule.ReadAtBegin();
    if (!d.energy_skipped) {
      Result<uint64_t> e = nvml_->TotalEnergyMillijoules(d.id);
      d.energy_begin = e.ok() ? d.energy.Update(*e).status() : e.status();
      d.energy_ok = d.energy_begin.ok();
    }
    if (d.gpm) {
      Status s = d.gpm->Begin(now);
      if (!s.ok()) Warn(&warnings_, "nvml:gpu" + std::to_string(d.id.index) + " GPM", s);
    }
  }
  return Status::Ok();
}

void NvmlCollector::ReadEnergy(Device& d, int64_t now_ns, const std::string& p,
                               std::vector<Sample>* out, Status* last_error) {
  const int64_t window = d.begin_ns >= 0 ? now_ns - d.begin_ns : -1;
  if (window >= 0) d.energy_rule.Saw(window);
  if (!d.energy_skipped && !d.energy_ok) {  // Begin's read failed (lost, busy): NVML's reason
    Warn(&warnings_, p + ":energy", d.energy_begin);
    *last_error = d.energy_begin;
    return;
  }
  if (const std::string why = d.energy_rule.WhyLeftOut(std::max<int64_t>(0, window));
      !why.empty()) {
    warnings_ += (warnings_.empty() ? "" : "; ") + p + ":energy: " + why + ": left out";
    return;
  }
  if (d.energy_skipped) {
    warnings_ += (warnings_.empty() ? "" : "; ") + p +
                 ":energy: not read at the window's start (the recent windows were all under half "
                 "the length its energy needs): left out";
    return;
  }
  if (Result<uint64_t> e = nvml_->TotalEnergyMillijoules(d.id); e.ok()) {
    Result<uint64_t> delta = d.energy.Update(*e);
    if (delta.ok()) {
      out->push_back(DeviceSample(p + ":energy", static_cast<double>(*delta) * 1e3, "uJ",
                                  SampleKind::kDelta, d.label));
    } else {
      Warn(&warnings_, p + ":energy", delta.status());
    }
  } else {
    Warn(&warnings_, p + ":energy", e.status());
    *last_error = e.status();
  }
}

void NvmlCollector::ReadDevice(Device& d, int64_t now_ns, std::vector<Sample>* out,
                               Status* last_error) {
  const std::string p = "nvml:gpu" + std::to_string(d.id.index);
  auto gauge = [&](const std::string& suffix, double v, const char* unit) {
    out->push_back(DeviceSample(p + suffix, v, unit, SampleKind::kGauge, d.label));
  };
  ReadEnergy(d, now_ns, p, out, last_error);
  if (Result<double> w = nvml_->PowerWatts(d.id); w.ok()) {
    gauge(":power", *w, "W");
  } else {
    Warn(&warnings_, p + ":power", w.status());
  }
  if (Result<nvmlUtilization_t> u = nvml_->Utilization(d.id); u.ok()) {
    gauge(":util_gpu", static_cast<double>(u->gpu), "%");
    gauge(":util_mem", static_cast<double>(u->memory), "%");
  } else {
    Warn(&warnings_, p + ":util", u.status());
  }
  const std::pair<nvmlClockType_t, const char*> clocks[] = {{NVML_CLOCK_SM, ":sm_clock"},
                                                            {NVML_CLOCK_MEM, ":mem_clock"}};
  for (const auto& [type, suffix] : clocks) {
    if (Result<unsigned> c = nvml_->ClockMHz(d.id, type); c.ok()) {
      gauge(suffix, static_cast<double>(*c), "MHz");
    } else {
      Warn(&warnings_, p + suffix, c.status());
    }
  }
  if (Result<nvmlMemory_t> m = nvml_->Memory(d.id); m.ok()) {
    gauge(":mem_used", static_cast<double>(m->used), "bytes");
    gauge(":mem_total", static_cast<double>(m->total), "bytes");  // the capacity (memory_fit)
  } else {
    Warn(&warnings_, p + ":mem_used", m.status());
    *last_error = m.status();
  }
  if (pid_ > 0) {  // the process's own memory on this GPU: a process gauge (ranks add up)
    if (auto procs = nvml_->ComputeProcesses(d.id); procs.ok()) {
      for (const nvmlProcessInfo_t& info : *procs) {
        if (static_cast<pid_t>(info.pid) == pid_ &&
            info.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) {
          // A process's value, read on one GPU: it names that GPU (the report says which).
          out->push_back(Sample{p + ":proc_mem_used", static_cast<double>(info.usedGpuMemory),
                                "bytes", SampleScope::kProcess, SampleKind::kGauge, d.label});
          break;
        }
      }
    } else {
      Warn(&warnings_, p + ":proc_mem_used", procs.status());
    }
  }
  if (d.gpm) {
    Status s = d.gpm->End(now_ns, p, d.label, out, &warnings_);
    // Its own messages name the GPU and GPM already; NVML's are named here.
    if (!s.ok() && s.message().starts_with(p + " GPM")) {
      warnings_ += (warnings_.empty() ? "" : "; ") + s.message();
    } else if (!s.ok()) {
      Warn(&warnings_, p + " GPM", s);
    }
  }
  if (!options_.field_ids.empty()) {
    Result<std::vector<nvmlFieldValue_t>> fields = nvml_->FieldValues(d.id, options_.field_ids);
    if (fields.ok()) {
      for (const nvmlFieldValue_t& f : *fields) {
        const std::string name = ":field" + std::to_string(f.fieldId);
        if (f.nvmlReturn == NVML_SUCCESS) {
          gauge(name, FieldAsDouble(f), "value");
        } else {
          Warn(&warnings_, p + name, Unsupported(nvml_->ErrorText(f.nvmlReturn)));
        }
      }
    } else {
      Warn(&warnings_, p + ":fields", fields.status());
    }
  }
}

Result<std::vector<Sample>> NvmlCollector::End() {
  if (!nvml_) return Internal("nvml: End() before a successful Open()");
  std::vector<Sample> out;
  if (devices_.empty()) {  // process mode, no GPU yet: never measured on every GPU instead
    return Unavailable("nvml: pid " + std::to_string(pid_) +
                       " holds no CUDA context on any NVIDIA GPU yet (looked up again at most "
                       "once a second)" +
                       (warnings_.empty() ? "" : ": " + warnings_));
  }
  // warnings_ holds Begin's lookup warnings; End's own follow.
  size_t answered = 0;
  Status last_error;
  const int64_t now = MonotonicNs();
  for (Device& d : devices_) {
    const size_t before = out.size();
    ReadDevice(d, now, &out, &last_error);
    answered += out.size() > before;
  }
  // A profiler holds a GPU (NVML_ERROR_IN_USE, collector.h): the whole reading is void, and
  // the agent backs off instead of reading around it every iteration.
  if (warnings_.find(kCountersBusyMarker) != std::string::npos) {
    return CountersBusy("nvml: " + warnings_);
  }
  if (answered == 0) {
    return Unavailable("nvml: no GPU answered: " +
                       (last_error.ok() ? warnings_ : last_error.message()));
  }
  return out;
}

void NvmlCollector::Close() {
  devices_.clear();
  nvml_.reset();
  pid_ = 0;
}

std::string NvmlCollector::Describe() const {
  std::string d = "nvml (" + (nvml_ ? nvml_->path() : std::string("closed")) + "):";
  if (pid_ > 0) d += " pid " + std::to_string(pid_) + (devices_.empty() ? " (no GPU yet)" : "");
  for (const Device& dev : devices_) {
    d += " gpu" + std::to_string(dev.id.index) + "=" + dev.label;
    d += dev.gpm ? " (GPM supported: its values only over windows of " +
                       std::to_string(gpm_options_.min_window_ns / 1'000'000) + " ms or more)"
         : dev.gpm_why_not.empty() ? ""
                                   : " (" + dev.gpm_why_not + ")";
    // A period measured since the last Begin is described already; Begin hands it over.
    std::optional<UpdatePeriod> p;
    if (!dev.energy_period_known) p = periods_->Get(dev.id.id());
    d += " (" + (p ? EnergyWindowRule(*p).Describe() : dev.energy_rule.Describe()) + ")";
  }
  return d;
}

Status NvmlEnergySource::Open() {
  Result<std::unique_ptr<NvmlLibrary>> lib = NvmlLibrary::Load(library_);
  if (!lib.ok()) return lib.status();
  // Present only if every GPU has an energy counter: a partial sum would be a wrong number.
  for (const NvmlDevice& d : (*lib)->devices()) {
    Result<uint64_t> e = (*lib)->TotalEnergyMillijoules(d);
    if (!e.ok())
      return e.status().code() == ErrorCode::kUnsupported ? e.status()
                                                          : Unsupported(e.status().message());
  }
  nvml_ = std::move(lib).value();
  counters_.assign(nvml_->devices().size(), WrappingCounter());
  total_uj_ = 0;
  return Status::Ok();
}

Result<double> NvmlEnergySource::ReadMicrojoules() {
  if (!nvml_) return Internal("nvml energy: read before Open()");
  const auto& devs = nvml_->devices();
  for (size_t i = 0; i < devs.size(); ++i) {
    Result<uint64_t> e = nvml_->TotalEnergyMillijoules(devs[i]);
    if (!e.ok()) return e.status();
    Result<uint64_t> delta = counters_[i].Update(*e);
    if (!delta.ok()) return delta.status().WithContext("gpu" + std::to_string(devs[i].index));
    total_uj_ += static_cast<double>(*delta) * 1e3;
  }
  return total_uj_;
}

std::string NvmlEnergySource::Describe() const {
  return "nvml total energy of " + std::to_string(nvml_ ? nvml_->devices().size() : 0) +
         " NVIDIA GPU(s)";
}

}  // namespace seqpoint::collectors
