// Renders DeviceTelemetry for people (an aligned text block per device) and for programs
// (JSON; the schema of `seqpoint gpu --json`, documented in firmware-shim/README.md). Values
// that are absent are left out (JSON objects) or null (JSON per-instance arrays, so indices
// keep their meaning); they are never printed as numbers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "firmware-shim/gpu_device.h"

namespace seqpoint::firmware {

nlohmann::json GpuMetricsToJson(const GpuMetrics& m);
nlohmann::json HwmonToJson(const HwmonReading& h);
nlohmann::json TelemetryToJson(const DeviceTelemetry& t);
// {"devices": [...]}
nlohmann::json TelemetryReportJson(const std::vector<DeviceTelemetry>& devices);

std::string FormatTelemetryText(const std::vector<DeviceTelemetry>& devices);

}  // namespace seqpoint::firmware
