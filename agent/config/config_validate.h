// Checks on config values that go beyond their TOML type (URL, host:port, run grouping), and the
// parsers the daemon uses for them, so that a value accepted by --check-config always works.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "agent/config/config.h"
#include "common/status.h"

namespace seqpoint::daemon {

struct HostPort {
  std::string host;  // numeric IPv4/IPv6 address or a name
  uint16_t port = 0;
};
// "127.0.0.1:9464", "[::1]:9464", "localhost:9090". Port 0 asks the kernel for a free one.
Result<HostPort> ParseHostPort(std::string_view text);

struct HttpUrl {
  bool tls = false;  // https://
  std::string host;
  uint16_t port = 80;        // 443 for https:// without a port
  std::string target = "/";  // path and query
};
// http:// and https:// (upload_security.h). Credentials in the URL (user:pass@) are refused:
// the URL is logged and shown by `seqpoint status`; the upload.*_file keys carry them instead.
Result<HttpUrl> ParseHttpUrl(std::string_view text);

// kAuto: the job as its launcher names it (agent/source/run_key.h), the default.
enum class RunGrouping { kAuto, kEnv, kCgroup, kPid };
struct RunGroupBy {
  RunGrouping kind = RunGrouping::kAuto;
  std::string env_name;  // for kEnv
};
Result<RunGroupBy> ParseRunGroupBy(std::string_view text);

// Every check above on a parsed config; the message names the key.
Status ValidateConfig(const DaemonConfig& config);

}  // namespace seqpoint::daemon
