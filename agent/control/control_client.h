// Client side of the control socket, linked by the CLI (`seqpoint status|runs|show|report`):
// connect, send one request line, read one response line. Plain blocking POSIX I/O with a
// timeout; no Asio, so the CLI stays small.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "agent/control/control_protocol.h"
#include "common/status.h"

namespace seqpoint::daemon {

inline constexpr const char* kDefaultControlSocket = "/run/seqpoint/control.sock";

// The socket to use: `flag` if set, else $SEQPOINT_CONTROL_SOCKET, else the default.
std::string ResolveControlSocket(const std::string& flag);

// Sends `request` and returns the daemon's result, or its error (PermissionDenied when the
// daemon refused this user; Unavailable when no daemon listens).
Result<nlohmann::json> SendControlRequest(const std::string& socket_path,
                                          const ControlRequest& request, int timeout_ms = 10000);
// The same for a raw line (tests send malformed ones); returns the raw response line.
Result<std::string> SendControlLine(const std::string& socket_path, const std::string& line,
                                    int timeout_ms = 10000);

}  // namespace seqpoint::daemon
