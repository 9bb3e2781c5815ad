#include "collectors/energy/energy_collector.h"

namespace seqpoint::collectors {

Status EnergyCollector::Open(const Target&) {
  Close();
  for (const std::string& wanted : config_.energy.sources) {
    const EnergySourceInfo* info = nullptr;
    for (const EnergySourceInfo& s : sources_) {
      if (s.name == wanted) info = &s;
    }
    if (info == nullptr) {
      skipped_ += (skipped_.empty() ? "" : "; ") + wanted + ": not an energy source of this build";
      continue;
    }
    std::unique_ptr<EnergySource> source = info->factory(config_);
    Status s = source->Open();
    if (s.ok()) {
      source_ = std::move(source);
      return Status::Ok();
    }
    skipped_ += (skipped_.empty() ? "" : "; ") + wanted + ": " + s.message();
  }
  return NotFound("no energy source present (" + skipped_ + ")");
}

Status EnergyCollector::Begin() {
  if (!source_) return Internal("energy: Begin() before a successful Open()");
  begin_uj_ = source_->ReadMicrojoules();
  return begin_uj_.ok()
             ? Status::Ok()
             : begin_uj_.status().WithContext("energy (" + std::string(source_->name()) + ")");
}

Result<std::vector<Sample>> EnergyCollector::End() {
  if (!source_) return Internal("energy: End() before a successful Open()");
  Result<double> end = source_->ReadMicrojoules();
  Result<double> begin = std::move(begin_uj_);
  begin_uj_ = Internal("energy: End() without Begin()");
  if (!begin.ok()) return begin.status();
  if (!end.ok()) return end.status().WithContext("energy (" + std::string(source_->name()) + ")");
  if (*end < *begin) return Internal("energy: source total went backwards");
  // The node's energy (docs/trace-csv.md): one device, whichever process was measured.
  return std::vector<Sample>{
      DeviceSample("energy_uj", *end - *begin, "uJ", SampleKind::kDelta, "node")};
}

void EnergyCollector::Close() {
  source_.reset();
  skipped_.clear();
}

std::string EnergyCollector::Describe() const {
  std::string d = "energy: " + (source_ ? source_->Describe() : std::string("no source"));
  if (!skipped_.empty()) d += " (skipped " + skipped_ + ")";
  return d;
}

}  // namespace seqpoint::collectors
