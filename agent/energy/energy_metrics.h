// The energy sampler's own health on /metrics (the per-run energy totals are the runs').
#pragma once

#include <cstdint>
#include <vector>

#include "agent/energy/energy_sampler.h"
#include "agent/metrics/metric_family.h"

namespace seqpoint::daemon {

// `interval_ms`: runs.energy_sample_interval_ms as the sampler was started.
std::vector<MetricFamily> EnergyFamilies(const EnergySampler& sampler, int64_t interval_ms);

}  // namespace seqpoint::daemon
