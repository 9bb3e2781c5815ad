// The uploader's health on /metrics: what was sent, refused, dropped, and what waits.
#pragma once

#include <vector>

#include "agent/metrics/metric_family.h"
#include "agent/upload/uploader.h"

namespace seqpoint::daemon {

std::vector<MetricFamily> UploadFamilies(const Uploader& uploader);

}  // namespace seqpoint::daemon
