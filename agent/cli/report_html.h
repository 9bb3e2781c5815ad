// `seqpoint report RUN --html FILE`: one self-contained HTML page (inline SVG drawn here, no
// scripts, no fetches; printable) from the JSON seqpointd answers for `report`
// (agent/daemon/control_views.cpp). Sections with no data in the answer are left out.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace seqpoint::cli {

// The whole page. `node` names the host the run ran on (shown in the title).
std::string RenderReportHtml(const nlohmann::json& report, const std::string& node);

// `seqpoint evaluate --html FILE`: the page of the evaluation that `evaluate --json` prints
// (per metric the projection with its interval beside the actual total, and |error| of
// SeqPoint beside the baselines). The title names the trace and the method.
std::string RenderEvaluateHtml(const nlohmann::json& evaluation);

// This host's name, for the title when the answer does not carry one.
std::string LocalNodeName();

}  // namespace seqpoint::cli
