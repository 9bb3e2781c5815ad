#include "collectors/nvml/nvml_collector.h"

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

Status NvmlCollector::Open(const Target& target) {
  Close();
  Result<std::unique_ptr<NvmlLibrary>> lib = NvmlLibrary::Load(options_.library);
  if (!lib.ok()) return lib.status();
  Result<std::vector<NvmlDevice>> selected = (*lib)->Select(target.device);
  if (!selected.ok()) return selected.status();
  nvml_ = std::move(lib).value();
  for (const NvmlDevice& d : *selected) devices_.push_back({d, WrappingCounter(), false});
  return Status::Ok();
}

Status NvmlCollector::Begin() {
  if (!nvml_) return Internal("nvml: Begin() before a successful Open()");
  for (Device& d : devices_) {
    Result<uint64_t> e = nvml_->TotalEnergyMillijoules(d.id);
    d.energy_ok = e.ok() && d.energy.Update(*e).ok();
  }
  return Status::Ok();
}

Result<std::vector<Sample>> NvmlCollector::End() {
  if (!nvml_) return Internal("nvml: End() before a successful Open()");
  std::vector<Sample> out;
  warnings_.clear();
  size_t answered = 0;
  Status last_error;
  for (Device& d : devices_) {
    const std::string p = "nvml:gpu" + std::to_string(d.id.index);
    const size_t before = out.size();
    if (Result<uint64_t> e = nvml_->TotalEnergyMillijoules(d.id); e.ok()) {
      Result<uint64_t> delta = d.energy.Update(*e);
      if (d.energy_ok && delta.ok()) {
        out.push_back({p + ":energy", static_cast<double>(*delta) * 1e3, "uJ"});
      } else if (!delta.ok()) {
        Warn(&warnings_, p + ":energy", delta.status());
      }
    } else {
      Warn(&warnings_, p + ":energy", e.status());
      last_error = e.status();
    }
    if (Result<double> w = nvml_->PowerWatts(d.id); w.ok()) {
      out.push_back({p + ":power", *w, "W"});
    } else {
      Warn(&warnings_, p + ":power", w.status());
    }
    if (Result<nvmlUtilization_t> u = nvml_->Utilization(d.id); u.ok()) {
      out.push_back({p + ":util_gpu", static_cast<double>(u->gpu), "%"});
      out.push_back({p + ":util_mem", static_cast<double>(u->memory), "%"});
    } else {
      Warn(&warnings_, p + ":util", u.status());
    }
    const std::pair<nvmlClockType_t, const char*> clocks[] = {{NVML_CLOCK_SM, ":sm_clock"},
                                                              {NVML_CLOCK_MEM, ":mem_clock"}};
    for (const auto& [type, suffix] : clocks) {
      if (Result<unsigned> c = nvml_->ClockMHz(d.id, type); c.ok()) {
        out.push_back({p + suffix, static_cast<double>(*c), "MHz"});
      } else {
        Warn(&warnings_, p + suffix, c.status());
      }
    }
    if (Result<nvmlMemory_t> m = nvml_->Memory(d.id); m.ok()) {
      out.push_back({p + ":mem_used", static_cast<double>(m->used), "bytes"});
    } else {
      Warn(&warnings_, p + ":mem_used", m.status());
      last_error = m.status();
    }
    if (!options_.field_ids.empty()) {
      Result<std::vector<nvmlFieldValue_t>> fields = nvml_->FieldValues(d.id, options_.field_ids);
      if (fields.ok()) {
        for (const nvmlFieldValue_t& f : *fields) {
          const std::string name = p + ":field" + std::to_string(f.fieldId);
          if (f.nvmlReturn == NVML_SUCCESS) {
            out.push_back({name, FieldAsDouble(f), "value"});
          } else {
            Warn(&warnings_, name, Unsupported(nvml_->ErrorText(f.nvmlReturn)));
          }
        }
      } else {
        Warn(&warnings_, p + ":fields", fields.status());
      }
    }
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
}

std::string NvmlCollector::Describe() const {
  std::string d = "nvml (" + (nvml_ ? nvml_->path() : std::string("closed")) + "):";
  for (const Device& dev : devices_) {
    d += " gpu" + std::to_string(dev.id.index) + (dev.id.pci.empty() ? "" : "=" + dev.id.pci);
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
