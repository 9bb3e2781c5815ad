// Human-readable rendering of seqpointd's control answers (the JSON of
// agent/daemon/control_views.cpp) for `seqpoint status|runs|show|report`.
#pragma once

#include <nlohmann/json.hpp>

namespace seqpoint::cli {

void RenderStatus(const nlohmann::json& status);
void RenderRuns(const nlohmann::json& runs);
void RenderShow(const nlohmann::json& show);
void RenderReport(const nlohmann::json& report);
// The answer of pause and resume: whether the collectors are paused, and until when.
void RenderPause(const nlohmann::json& pause);

}  // namespace seqpoint::cli
