// The iteration source's health on /metrics: are the probes loaded, what they delivered.
#pragma once

#include <vector>

#include "agent/metrics/metric_family.h"
#include "agent/source/iteration_source.h"

namespace seqpoint::daemon {

// `source` is null when no probe could be loaded.
std::vector<MetricFamily> SourceFamilies(const IterationSource* source);

}  // namespace seqpoint::daemon
