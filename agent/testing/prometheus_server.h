// Test helper: a real Prometheus server (Debian's prometheus package) started on a free local
// port with the remote-write receiver on and its TSDB in a temporary directory, stopped when the
// object goes. Queries go through its HTTP API (/api/v1/query), as a user's would. With a web
// config (--web.config.file: TLS, client certificates, basic auth) it is queried as `client`.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "agent/testing/test_harness.h"
#include "agent/testing/tls_test_util.h"

namespace seqpoint::daemon::testing {

inline bool HavePrometheus() { return std::system("command -v prometheus > /dev/null 2>&1") == 0; }

class PrometheusServer {
 public:
  // `web_config`: YAML for --web.config.file (empty: plain HTTP, no auth).
  PrometheusServer(const TempDir& dir, int port, const std::string& web_config = "",
                   WebClient client = {})
      : port_(port), client_(std::move(client)) {
    std::string config = dir.Write("prometheus.yml", "global:\n  scrape_interval: 1h\n");
    std::string tsdb = dir.path() + "/tsdb-" + std::to_string(port);
    std::string log = dir.path() + "/prometheus-" + std::to_string(port) + ".log";
    std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port);
    std::string storage = "--storage.tsdb.path=" + tsdb;
    std::string cfg = "--config.file=" + config;
    std::vector<std::string> args = {
        "prometheus",      cfg, storage, listen, "--web.enable-remote-write-receiver",
        "--log.level=warn"};
    if (!web_config.empty()) {
      args.push_back("--web.config.file=" +
                     dir.Write("web-" + std::to_string(port) + ".yml", web_config));
    }
    pid_ = fork();
    if (pid_ == 0) {
      FILE* out = std::freopen(log.c_str(), "w", stderr);
      (void)out;
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("prometheus", argv.data());
      _exit(127);
    }
  }
  ~PrometheusServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }
  bool WaitReady() {
    return WaitFor([&] { return Get("/-/ready").status == 200; });
  }
  // Instant query; `at` is a Unix time ("" = now). Returns the parsed "result" array.
  nlohmann::json Query(const std::string& promql, const std::string& at = "") {
    std::string target =
        "/api/v1/query?query=" + UrlEncode(promql) + (at.empty() ? "" : "&time=" + at);
    HttpResult r = Get(target);
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return nlohmann::json::array();
    return j["data"]["result"];
  }
  int port() const { return port_; }
  HttpResult Get(const std::string& target) {
    return HttpGetWith(client_.tls ? "localhost" : "127.0.0.1", port_, target, client_);
  }

 private:
  static std::string UrlEncode(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
      if (std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '~') {
        out += static_cast<char>(c);
      } else {
        char buf[4];
        std::snprintf(buf, sizeof buf, "%%%02X", c);
        out += buf;
      }
    }
    return out;
  }
  int port_;
  WebClient client_;
  pid_t pid_ = -1;
};

}  // namespace seqpoint::daemon::testing
