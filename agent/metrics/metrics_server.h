// The /metrics endpoint (docs/architecture.md: 127.0.0.1:9464 by default): a small
// HTTP/1.1 server on Boost.Beast. GET /metrics renders the provider's families; / lists the
// endpoint; anything else is 404, any method but GET/HEAD is 405. Bounded: 8 KiB of request
// header, 32 connections, 30 s per request. Keep-alive as the client asks (Prometheus reuses
// its connection).
//
// Threads: runs on the daemon's io_context; the provider is called on that thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace seqpoint::daemon {

using ExpositionProvider = std::function<std::string()>;

class MetricsServer {
 public:
  // listen: "host:port" (port 0 picks a free one; see port()).
  static Result<std::unique_ptr<MetricsServer>> Start(boost::asio::io_context& io,
                                                      const std::string& listen,
                                                      ExpositionProvider provider);
  ~MetricsServer();
  void Stop();
  uint16_t port() const { return port_; }
  uint64_t scrapes() const { return scrapes_; }

 private:
  class Session;
  MetricsServer(boost::asio::io_context& io, ExpositionProvider provider);
  void Accept();

  boost::asio::ip::tcp::acceptor acceptor_;
  ExpositionProvider provider_;
  uint16_t port_ = 0;
  uint64_t scrapes_ = 0;
  int sessions_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace seqpoint::daemon
