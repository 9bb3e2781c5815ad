#include "agent/cli/report_devices.h"

#include <cstdint>

#include "agent/cli/svg_plot.h"

namespace seqpoint::cli {
namespace {

using nlohmann::json;

std::string Cell(const std::string& s) { return "<td>" + svg::Escape(s) + "</td>"; }

std::string Joined(const json& list) {
  std::string out;
  if (!list.is_array()) return out;
  for (const json& x : list) {
    if (x.is_string()) out += (out.empty() ? "" : ", ") + x.get<std::string>();
  }
  return out;
}

std::string Count(const json& d, const char* key) {
  auto it = d.find(key);
  return it != d.end() && it->is_number_unsigned() ? std::to_string(it->get<uint64_t>()) : "—";
}

}  // namespace

std::string DevicesSectionHtml(const json& report) {
  if (!report.is_object()) return "";
  std::string rows;
  if (auto it = report.find("devices"); it != report.end() && it->is_array()) {
    for (const json& d : *it) {
      if (!d.is_object() || !d.contains("device") || !d["device"].is_string()) continue;
      rows += "<tr>" + Cell(d["device"].get<std::string>()) +
              Cell(Joined(d.value("collectors", json::array()))) + Cell(Count(d, "iterations")) +
              Cell(Count(d, "values")) + "</tr>\n";
    }
  }
  uint64_t unrecorded = 0;
  if (auto it = report.find("devices_not_recorded");
      it != report.end() && it->is_number_unsigned()) {
    unrecorded = it->get<uint64_t>();
  }
  if (rows.empty() && unrecorded == 0) return "";
  std::string body;
  if (!rows.empty()) {
    body =
        "<table>\n<tr><th>device</th><th>collectors</th><th>measured iterations</th>"
        "<th>values</th></tr>\n" +
        rows + "</table>\n";
  }
  std::string caption =
      "The device each measured value was read on: a GPU by its UUID (under MIG "
      "\"<uuid>/gi<G>/ci<C>\"), a RAPL zone, \"node\" for the node's energy. A process's own "
      "values (time, perf, PAPI) name no device.";
  if (unrecorded > 0) {
    caption += " The device of " + std::to_string(unrecorded) +
               " values was not recorded: they were stored by a seqpointd before store schema 9.";
  }
  return "<section>\n<h2>Measured on</h2>\n<figure>\n" + body + "<figcaption>" +
         svg::Escape(caption) + "</figcaption>\n</figure>\n</section>\n";
}

}  // namespace seqpoint::cli
