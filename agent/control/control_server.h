// The control socket (docs/architecture.md): a Unix stream socket serving the line-JSON
// protocol of control_protocol.h. Each connection: peer credentials checked first (refused
// with one error line, then closed), then requests answered in order. Bounded everywhere: a
// request line at most max_request_bytes, at most max_clients connections, 30 s idle timeout.
//
// Threads: runs on the daemon's io_context; the handler is called on that thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/control/control_protocol.h"
#include "agent/control/peer_policy.h"
#include "common/status.h"

namespace seqpoint::daemon {

using ControlHandler = std::function<Result<nlohmann::json>(const ControlRequest&)>;

struct ControlServerOptions {
  std::string socket_path;
  std::string group;  // control.group
  int64_t max_request_bytes = 4096;
  int64_t max_clients = 16;
};

struct ControlServerStats {
  uint64_t requests = 0;
  uint64_t errors = 0;   // bad requests answered with an error
  uint64_t refused = 0;  // peers refused by credentials or the client limit
};

class ControlServer {
 public:
  // Binds the socket (removing a stale one; refusing if another daemon answers on it),
  // sets its mode 0660 and group, and starts accepting.
  static Result<std::unique_ptr<ControlServer>> Start(boost::asio::io_context& io,
                                                      ControlServerOptions options,
                                                      ControlHandler handler);
  ~ControlServer();
  // Stops accepting, closes every connection and removes the socket file.
  void Stop();
  // Applies a reloaded control.group / limits to new connections.
  Status Reconfigure(const ControlServerOptions& options);
  const ControlServerStats& stats() const { return stats_; }
  int active_clients() const { return active_; }

 private:
  class Connection;
  ControlServer(boost::asio::io_context& io, ControlServerOptions options, ControlHandler handler,
                PeerPolicy policy);
  void Accept();

  boost::asio::io_context& io_;
  ControlServerOptions options_;
  ControlHandler handler_;
  PeerPolicy policy_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  ControlServerStats stats_;
  int active_ = 0;
  std::list<std::weak_ptr<Connection>> connections_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool stopped_ = false;
};

}  // namespace seqpoint::daemon
