// The control protocol between `seqpoint` and seqpointd over the Unix socket: one JSON object
// per line each way. Requests:
//   {"cmd": "status"}
//   {"cmd": "runs", "all": false, "limit": 50}        all=false: active runs only
//   {"cmd": "show", "run": "ID-or-key"}               histogram, SeqPoints, projections
//   {"cmd": "report", "run": "ID-or-key"}             show + measurements + SL-bin cost history
//   {"cmd": "history", "seq_len": 128, "metric": "time_ns", "days": 30}
//   {"cmd": "pause", "for_ms": 2000}                  collectors stop node-wide; for_ms 0 or
//                                                     absent: until resume
//   {"cmd": "resume"}                                 collectors start again
// Responses: {"ok": true, "result": {...}} or {"ok": false, "error": "...", "code": "..."}.
// A request line longer than control.max_request_bytes is refused and the connection closed;
// unknown commands, unknown fields and wrong types are errors naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace seqpoint::daemon {

inline constexpr int kControlProtocolVersion = 1;
inline constexpr int64_t kMaxPauseMs = int64_t{7} * 86400 * 1000;  // pause for_ms

struct ControlRequest {
  std::string cmd;                 // status | runs | show | report | history | pause | resume
  std::string run;                 // show, report
  bool all = false;                // runs
  int64_t limit = 50;              // runs
  int64_t seq_len = 0;             // history
  std::string metric = "time_ns";  // history
  int64_t days = 30;               // history
  int64_t for_ms = 0;              // pause: how long; 0 = until resume
};

Result<ControlRequest> ParseControlRequest(std::string_view line);
nlohmann::json ControlRequestToJson(const ControlRequest& request);

// One response line, newline included.
std::string OkResponseLine(const nlohmann::json& result);
std::string ErrorResponseLine(const Status& status);

// Client side: a response line back into a result or the daemon's error.
Result<nlohmann::json> ParseResponseLine(std::string_view line);

}  // namespace seqpoint::daemon
