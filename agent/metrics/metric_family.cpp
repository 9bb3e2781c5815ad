#include "agent/metrics/metric_family.h"

#include <cmath>
#include <cstdio>

namespace seqpoint::daemon {
namespace {

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string EscapeHelp(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string RenderExposition(const std::vector<MetricFamily>& families) {
  std::string out;
  out.reserve(4096);
  for (const MetricFamily& f : families) {
    if (f.samples.empty()) continue;
    out += "# HELP " + f.name + " " + EscapeHelp(f.help) + "\n";
    out += "# TYPE " + f.name + " " + f.type + "\n";
    for (const MetricSample& s : f.samples) {
      out += f.name;
      if (!s.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < s.labels.size(); ++i) {
          if (i > 0) out += ',';
          out += s.labels[i].first + "=\"" + EscapeLabelValue(s.labels[i].second) + "\"";
        }
        out += '}';
      }
      out += ' ' + FormatValue(s.value) + '\n';
    }
  }
  return out;
}

BaseUnit ToBaseUnit(std::string_view metric, std::string_view unit) {
  std::string name(metric);
  auto strip = [&](std::string_view suffix) {
    if (EndsWith(name, suffix)) name.resize(name.size() - suffix.size());
  };
  if (unit == "ns") {
    strip("_ns");
    return {name + "_seconds", "seconds", 1e-9};
  }
  if (unit == "us") {
    strip("_us");
    return {name + "_seconds", "seconds", 1e-6};
  }
  if (unit == "uJ" || unit == "uj") {
    strip("_uj");
    strip("_uJ");
    return {name + "_joules", "joules", 1e-6};
  }
  if (unit == "mJ" || unit == "mj") {
    strip("_mj");
    return {name + "_joules", "joules", 1e-3};
  }
  if (unit == "J") return {name, "joules", 1.0};
  return {name, std::string(unit), 1.0};
}

}  // namespace seqpoint::daemon
