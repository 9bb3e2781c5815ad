#include "agent/config/config_validate.h"

#include <cctype>
#include <charconv>

#include "agent/config/config_zero_code.h"

namespace seqpoint::daemon {

Result<HostPort> ParseHostPort(std::string_view text) {
  HostPort hp;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return InvalidArgument("'" + std::string(text) + "' is not [ipv6]:port");
    }
    hp.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return InvalidArgument("'" + std::string(text) + "' is not host:port (e.g. 127.0.0.1:9464)");
    }
    hp.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || ptr != port.data() + port.size() || value > 65535 || port.empty()) {
    return InvalidArgument("'" + std::string(text) + "' has no valid port (0-65535)");
  }
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

Result<HttpUrl> ParseHttpUrl(std::string_view text) {
  HttpUrl url;
  std::string_view rest;
  if (size_t scheme_end = text.find("://");
      scheme_end != std::string_view::npos &&
      text.substr(0, text.find('/', scheme_end + 3)).find('@') != std::string_view::npos) {
    // Never echo the URL here: it holds a secret.
    return InvalidArgument(
        "the URL holds credentials (user:password@), which would be logged; remove them and set "
        "upload.basic_auth_user and upload.basic_auth_password_file (or "
        "upload.bearer_token_file)");
  }
  if (text.substr(0, 7) == "http://") {
    rest = text.substr(7);
  } else if (text.substr(0, 8) == "https://") {
    rest = text.substr(8);
    url.tls = true;
    url.port = 443;
  } else {
    return InvalidArgument("'" + std::string(text) + "' is not an http:// or https:// URL");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) url.target = std::string(rest.substr(slash));
  if (authority.empty()) return InvalidArgument("'" + std::string(text) + "' has no host");
  bool has_port = authority.back() != ']' && authority.find(':') != std::string_view::npos;
  if (has_port) {
    auto hp = ParseHostPort(authority);
    if (!hp.ok()) return hp.status();
    url.host = hp->host;
    url.port = hp->port;
  } else {
    url.host = std::string(authority);
    if (url.host.front() == '[') url.host = url.host.substr(1, url.host.size() - 2);
  }
  return url;
}

Result<RunGroupBy> ParseRunGroupBy(std::string_view text) {
  RunGroupBy g;
  if (text == "auto") {
    g.kind = RunGrouping::kAuto;
  } else if (text == "cgroup") {
    g.kind = RunGrouping::kCgroup;
  } else if (text == "pid") {
    g.kind = RunGrouping::kPid;
  } else if (text.substr(0, 4) == "env:" && text.size() > 4) {
    g.kind = RunGrouping::kEnv;
    g.env_name = std::string(text.substr(4));
  } else {
    return InvalidArgument("'" + std::string(text) +
                           "' is not auto, env:NAME, cgroup or pid (e.g. auto, or "
                           "env:SEQPOINT_RUN_ID)");
  }
  return g;
}

Status ValidateConfig(const DaemonConfig& c) {
  if (!c.metrics_listen.empty()) {
    auto hp = ParseHostPort(c.metrics_listen);
    if (!hp.ok()) return hp.status().WithContext("metrics.listen");
  }
  if (!c.upload_url.empty()) {
    auto url = ParseHttpUrl(c.upload_url);
    if (!url.ok()) return url.status().WithContext("upload.url");
  }
  auto g = ParseRunGroupBy(c.run_group_by);
  if (!g.ok()) return g.status().WithContext("runs.group_by");
  if (c.run_observer_action != "flag" && c.run_observer_action != "drop") {
    return InvalidArgument("runs.observer_effect_action must be \"flag\" or \"drop\", got '" +
                           c.run_observer_action + "'");
  }
  if ((c.probes_ring_buffer_kib & (c.probes_ring_buffer_kib - 1)) != 0) {
    return InvalidArgument("probes.ring_buffer_kib must be a power of two, got " +
                           std::to_string(c.probes_ring_buffer_kib));
  }
  for (const auto& [path, key] :
       {std::pair{c.state_dir, "daemon.state_dir"}, std::pair{c.runtime_dir, "daemon.runtime_dir"},
        std::pair{c.proc_root, "daemon.proc_root"}}) {
    if (path.empty() || path.front() != '/') {
      return InvalidArgument(std::string(key) + " must be an absolute path, got '" + path + "'");
    }
  }
  if (c.run_gpu_sync_tail_ms >= c.run_gpu_sync_bound_ms) {
    return InvalidArgument(
        "runs.gpu_sync_tail_ms (" + std::to_string(c.run_gpu_sync_tail_ms) +
        ") must be less than runs.gpu_sync_bound_ms (" + std::to_string(c.run_gpu_sync_bound_ms) +
        "): lower runs.gpu_sync_tail_ms (default 2) or raise runs.gpu_sync_bound_ms (default "
        "1000)");
  }
  SEQPOINT_RETURN_IF_ERROR(ValidateZeroCodeConfig(c));
  for (const auto& [k, v] : c.upload_labels) {
    bool ok = !k.empty() && !(k[0] >= '0' && k[0] <= '9') && k.substr(0, 2) != "__";
    for (char ch : k) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
    if (!ok) {
      return InvalidArgument("upload.labels: '" + k +
                             "' is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, no __)");
    }
  }
  return Status::Ok();
}

}  // namespace seqpoint::daemon
