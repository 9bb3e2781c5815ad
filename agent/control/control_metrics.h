// The control socket's counters on /metrics.
#pragma once

#include <vector>

#include "agent/control/control_server.h"
#include "agent/metrics/metric_family.h"

namespace seqpoint::daemon {

std::vector<MetricFamily> ControlFamilies(const ControlServerStats& stats);

}  // namespace seqpoint::daemon
