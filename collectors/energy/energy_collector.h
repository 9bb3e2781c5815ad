// The energy collector: "energy_uj" per measured iteration from the best energy source present
// on this node, in the configured order of preference (collectors.energy.sources, default
// gpu_metrics accumulator, ROCm SMI, NVML, RAPL powercap). Open tries each in turn and keeps
// the first that opens; Describe() names it and why the ones before it were skipped. The
// per-iteration joules, with the trace's `tokens`, let `seqpoint project` give a run's energy
// and energy per token.
//
// A window whose start or end read failed (device gone, counter reset, EAGAIN) has no
// energy_uj: End fails with the reason, CollectorSet counts it, nothing wrong is reported.
//
// Threads: one thread drives it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/collector_config.h"
#include "collectors/energy/energy_source.h"

namespace seqpoint::collectors {

using EnergySourceFactory = std::unique_ptr<EnergySource> (*)(const CollectorConfig&);

struct EnergySourceInfo {
  std::string_view name;  // "gpu_metrics", "rocm_smi", "nvml", "rapl"
  EnergySourceFactory factory;
};

class EnergyCollector : public Collector {
 public:
  EnergyCollector(CollectorConfig config, std::vector<EnergySourceInfo> sources)
      : config_(std::move(config)), sources_(std::move(sources)) {}

  std::string_view name() const override { return "energy"; }
  Status Open(const Target& target) override;
  Status Begin() override;
  Result<std::vector<Sample>> End() override;
  void Close() override;
  std::string Describe() const override;

  // The source in use ("" before a successful Open).
  std::string_view source_name() const { return source_ ? source_->name() : ""; }

 private:
  CollectorConfig config_;
  std::vector<EnergySourceInfo> sources_;
  std::unique_ptr<EnergySource> source_;
  std::string skipped_;  // "gpu_metrics: <why>; rocm_smi: <why>"
  Result<double> begin_uj_ = Internal("energy: End() without Begin()");
};

}  // namespace seqpoint::collectors
