// The daemon's metrics as plain values: families of samples with labels. The same families are
// rendered in the Prometheus text exposition format (/metrics) and, for the projection families,
// encoded as remote-write time series, so the two exports never disagree on names or labels.
//
// Naming follows Prometheus conventions as `promtool check metrics` enforces them: base units
// (seconds, joules, bytes), counters end in _total, snake_case, HELP on every family.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace seqpoint::daemon {

using Labels = std::vector<std::pair<std::string, std::string>>;

struct MetricSample {
  Labels labels;
  double value = 0;
};

struct MetricFamily {
  std::string name;
  std::string type;  // gauge | counter | untyped
  std::string help;
  std::vector<MetricSample> samples;

  MetricFamily& Add(Labels labels, double value) {
    samples.push_back({std::move(labels), value});
    return *this;
  }
};

inline MetricFamily Gauge(std::string name, std::string help) {
  return MetricFamily{std::move(name), "gauge", std::move(help), {}};
}
inline MetricFamily Counter(std::string name, std::string help) {
  return MetricFamily{std::move(name), "counter", std::move(help), {}};
}

// Text exposition format 0.0.4 (one family after another, HELP and TYPE first).
std::string RenderExposition(const std::vector<MetricFamily>& families);
// Label value escaping of the exposition format: backslash, double quote and newline.
std::string EscapeLabelValue(std::string_view value);

// A metric name and value in base units: time_ns -> (time_seconds, x1e-9), energy_uj ->
// (energy_joules, x1e-6). Unknown units pass through unchanged.
struct BaseUnit {
  std::string name;
  std::string unit;
  double scale = 1.0;
};
BaseUnit ToBaseUnit(std::string_view metric, std::string_view unit);

}  // namespace seqpoint::daemon
