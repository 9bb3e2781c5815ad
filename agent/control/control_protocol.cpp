#include "agent/control/control_protocol.h"

namespace seqpoint::daemon {
namespace {

using nlohmann::json;

Status FieldError(const std::string& field, const std::string& want) {
  return InvalidArgument("control request field '" + field + "' must be " + want);
}

}  // namespace

Result<ControlRequest> ParseControlRequest(std::string_view line) {
  // allow_exceptions=false: a parse error yields a discarded value instead of a throw.
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument(
        "control request is not a JSON object on one line, e.g. "
        "{\"cmd\": \"status\"}");
  }
  ControlRequest r;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "cmd") {
      if (!v.is_string()) return FieldError(k, "a string");
      r.cmd = v.get<std::string>();
    } else if (k == "run" || k == "metric") {
      if (!v.is_string()) return FieldError(k, "a string");
      (k == "run" ? r.run : r.metric) = v.get<std::string>();
    } else if (k == "all") {
      if (!v.is_boolean()) return FieldError(k, "true or false");
      r.all = v.get<bool>();
    } else if (k == "limit" || k == "seq_len" || k == "days" || k == "for_ms") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) {
        return FieldError(k, "a non-negative integer");
      }
      (k == "limit"     ? r.limit
       : k == "seq_len" ? r.seq_len
       : k == "days"    ? r.days
                        : r.for_ms) = v.get<int64_t>();
    } else {
      return InvalidArgument("control request has unknown field '" + k + "'");
    }
  }
  if (r.cmd != "status" && r.cmd != "runs" && r.cmd != "show" && r.cmd != "report" &&
      r.cmd != "history" && r.cmd != "pause" && r.cmd != "resume") {
    return InvalidArgument("unknown control command '" + r.cmd +
                           "' (known: status, runs, show, report, history, pause, resume)");
  }
  if ((r.cmd == "show" || r.cmd == "report") && r.run.empty()) {
    return InvalidArgument("'" + r.cmd + "' needs a run: {\"cmd\": \"" + r.cmd +
                           "\", \"run\": \"ID\"} (see `seqpoint runs`)");
  }
  if (r.cmd == "pause" && r.for_ms > kMaxPauseMs) {
    return InvalidArgument("'pause' for_ms must be at most " + std::to_string(kMaxPauseMs) +
                           " (7 days); leave it out to pause until 'resume'");
  }
  if (r.cmd == "history" && r.seq_len <= 0) {
    return InvalidArgument("'history' needs a positive seq_len");
  }
  return r;
}

nlohmann::json ControlRequestToJson(const ControlRequest& r) {
  json j = {{"cmd", r.cmd}};
  if (r.cmd == "runs") {
    j["all"] = r.all;
    j["limit"] = r.limit;
  }
  if (r.cmd == "show" || r.cmd == "report") j["run"] = r.run;
  if (r.cmd == "pause") j["for_ms"] = r.for_ms;
  if (r.cmd == "history") {
    j["seq_len"] = r.seq_len;
    j["metric"] = r.metric;
    j["days"] = r.days;
  }
  return j;
}

std::string OkResponseLine(const nlohmann::json& result) {
  json j = {{"ok", true}, {"result", result}};
  // error_handler::replace: a stray invalid UTF-8 byte in a key never aborts the response.
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string ErrorResponseLine(const Status& status) {
  json j = {{"ok", false},
            {"error", status.message()},
            {"code", std::string(ErrorCodeName(status.code()))}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<nlohmann::json> ParseResponseLine(std::string_view line) {
  json j = json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
    return Internal("seqpointd sent a response that is not protocol JSON: '" +
                    std::string(line.substr(0, 200)) + "'");
  }
  if (j["ok"].get<bool>()) return j.value("result", json::object());
  std::string code = j.value("code", "");
  std::string msg = j.value("error", "unknown error");
  if (code == "permission denied") return PermissionDenied(msg);
  if (code == "not found") return NotFound(msg);
  if (code == "invalid argument") return InvalidArgument(msg);
  return Unavailable(msg);
}

}  // namespace seqpoint::daemon
