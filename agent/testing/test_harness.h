// Test harness: a Daemon running in-process on its own thread, with every path in a temporary
// directory, /metrics on a free port and a control client; plus a blocking HTTP GET. Tests talk
// to the daemon only through its socket and HTTP, as users do, never through its internals.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <string>
#include <thread>

#include "agent/control/control_client.h"
#include "agent/daemon/daemon.h"
#include "agent/daemon/source_factory.h"
#include "agent/testing/test_util.h"

namespace seqpoint::daemon::testing {

struct HttpResult {
  int status = 0;
  std::string body;
  std::string error;
};

inline HttpResult HttpGet(const std::string& host, int port, const std::string& target) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  HttpResult out;
  try {
    boost::asio::io_context io;
    boost::asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(30));
    stream.connect(resolver.resolve(host, std::to_string(port)));
    http::request<http::empty_body> req(http::verb::get, target, 11);
    req.set(http::field::host, host);
    http::write(stream, req);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(stream, buf, res);
    out.status = static_cast<int>(res.result_int());
    out.body = res.body();
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

class DaemonHarness {
 public:
  // Defaults for tests: temp state and runtime dirs, /metrics on a free port, debug logs off.
  static DaemonConfig TestConfig(const TempDir& dir) {
    DaemonConfig c;
    c.state_dir = dir.path() + "/state";
    c.runtime_dir = dir.path() + "/run";
    c.metrics_listen = "127.0.0.1:0";
    c.log_level = LogLevel::kWarn;
    c.flush_interval_ms = 200;
    return c;
  }

  Status Start(DaemonConfig config, DaemonParts parts, std::string config_path = "") {
    socket_ = config.ControlSocketPath();
    auto d = Daemon::Create(std::move(config), std::move(config_path), {}, std::move(parts));
    if (!d.ok()) return d.status();
    daemon_ = std::move(*d);
    thread_ = std::thread([this] { (void)daemon_->Run(); });
    return Status::Ok();
  }
  void Stop() {
    if (!daemon_) return;
    daemon_->RequestShutdown();
    thread_.join();
    daemon_.reset();
  }
  ~DaemonHarness() { Stop(); }

  Result<nlohmann::json> Request(ControlRequest r) const { return SendControlRequest(socket_, r); }
  Result<nlohmann::json> Show(const std::string& run) const {
    ControlRequest r;
    r.cmd = "show";
    r.run = run;
    return Request(r);
  }
  Result<nlohmann::json> Runs(bool all) const {
    ControlRequest r;
    r.cmd = "runs";
    r.all = all;
    return Request(r);
  }
  int metrics_port() const { return daemon_->metrics_port(); }
  const std::string& socket() const { return socket_; }

 private:
  std::unique_ptr<Daemon> daemon_;
  std::thread thread_;
  std::string socket_;
};

// Replay parts for the recorded trace, each process its own run "job-<i>".
inline DaemonParts ReplayParts(int processes = 1, ReplaySpec spec = {}) {
  for (int i = 0; i < processes; ++i)
    spec.traces.push_back(RecordedTrace() + "@job-" + std::to_string(i));
  return MakeDaemonParts(spec);
}

}  // namespace seqpoint::daemon::testing
