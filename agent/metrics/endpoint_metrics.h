// The /metrics endpoint's own families: scrapes, and the connections it refused or closed to
// stay available (metrics_server.h says when each happens).
#pragma once

#include <vector>

#include "agent/metrics/metric_family.h"
#include "agent/metrics/metrics_server.h"

namespace seqpoint::daemon {

std::vector<MetricFamily> EndpointFamilies(const MetricsServer& server);

}  // namespace seqpoint::daemon
