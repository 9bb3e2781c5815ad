// The "Measured on" part of `seqpoint report --html`: which device (a GPU's UUID, "<uuid>/gi<G>/
// ci<C>" under MIG, a RAPL zone, "node") each measured value came from, from the `devices` list
// and the per-row `device` of seqpointd's report answer (agent/store/measured_devices.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace seqpoint::cli {

// One HTML section; "" when the answer names no device and none is unrecorded.
std::string DevicesSectionHtml(const nlohmann::json& report);

}  // namespace seqpoint::cli
