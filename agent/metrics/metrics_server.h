// The /metrics endpoint (docs/architecture.md: 127.0.0.1:9464 by default): a small
// HTTP/1.1 server on Boost.Beast. GET /metrics renders the provider's families; / lists the
// endpoint; anything else is 404, any method but GET/HEAD is 405. Keep-alive as the client asks
// (Prometheus reuses its connection).
//
// No client can hold it hostage (metrics.listen may be 0.0.0.0): every request header must
// arrive within header_timeout_ms of its first byte (a new connection's first request within
// header_timeout_ms of the accept), a kept-alive connection may wait idle_timeout_ms for its next
// request, a response must be read within kWriteTimeout. At most max_connections are served at
// once; at that limit a new connection closes the one idle the longest (waiting for a request
// of which nothing has come), and only when every connection is mid-request is the new one
// answered "503 Service Unavailable" (Retry-After: 1) and closed, so a client always gets an
// HTTP answer, never a bare close. Up to max_connections such refusals run at once; beyond
// that the server stops accepting until one ends, and new connections wait in the kernel's
// listen backlog rather than being dropped.
//
// Threads: runs on the daemon's io_context; the provider is called on that thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>

#include "common/status.h"

namespace seqpoint::daemon {

using ExpositionProvider = std::function<std::string()>;

struct MetricsServerOptions {
  std::string listen = "127.0.0.1:9464";  // "host:port" (port 0 picks a free one; see port())
  int64_t max_connections = 64;           // metrics.max_connections
  int64_t idle_timeout_ms = 120000;       // metrics.idle_timeout_ms
  int64_t header_timeout_ms = 5000;       // metrics.header_timeout_ms
};

struct MetricsServerStats {
  uint64_t scrapes = 0;        // GET/HEAD /metrics answered
  uint64_t rejected = 0;       // answered 503: every connection was mid-request
  uint64_t idle_closed = 0;    // idle connections closed to make room for a new one
  uint64_t idle_timed_out = 0;    // closed after idle_timeout_ms without a request
  uint64_t header_timed_out = 0;  // closed: a request header not complete in header_timeout_ms
};

class MetricsServer {
 public:
  static Result<std::unique_ptr<MetricsServer>> Start(boost::asio::io_context& io,
                                                      MetricsServerOptions options,
                                                      ExpositionProvider provider);
  ~MetricsServer();
  // Stops accepting and closes every connection.
  void Stop();
  // A reloaded limit or timeout applies from each connection's next wait (the address needs a
  // restart).
  void Reconfigure(const MetricsServerOptions& options);
  uint16_t port() const { return port_; }
  uint64_t scrapes() const { return stats_.scrapes; }
  const MetricsServerStats& stats() const { return stats_; }
  int connections() const { return sessions_; }

 private:
  class Session;
  class Refusal;
  MetricsServer(boost::asio::io_context& io, MetricsServerOptions options,
                ExpositionProvider provider);
  void Accept();
  void Admit(boost::asio::ip::tcp::socket socket);
  // Closes the connection idle the longest; false when none is idle.
  bool CloseOldestIdle();
  // A session or refusal ended: accepting resumes if it had paused at the limits.
  void Released();
  bool AtLimits() const;

  boost::asio::ip::tcp::acceptor acceptor_;
  MetricsServerOptions options_;
  ExpositionProvider provider_;
  uint16_t port_ = 0;
  MetricsServerStats stats_;
  int sessions_ = 0;  // connections being served (at most max_connections)
  int refusals_ = 0;  // connections being answered 503 (at most max_connections)
  bool accepting_ = false;  // an async_accept is pending
  bool stopped_ = false;
  std::list<std::weak_ptr<Session>> session_list_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace seqpoint::daemon
