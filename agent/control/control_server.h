// The control socket (docs/architecture.md): a Unix stream socket serving the line-JSON
// protocol of control_protocol.h. Each connection: peer credentials checked first (refused
// with one error line, then closed), then requests answered in order. Bounded everywhere: a
// request line at most max_request_bytes; each request line must arrive, and each answer be
// read, within client_timeout_ms, or the connection is closed; at most max_clients
// connections, and at that limit a new client closes the connection idle the longest (no
// request under way), so idle clients can never lock real ones out. A client is refused only
// when every connection is mid-request.
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
  int64_t client_timeout_ms = 5000;  // control.client_timeout_ms
};

struct ControlServerStats {
  uint64_t requests = 0;
  uint64_t errors = 0;       // bad requests answered with an error
  uint64_t refused = 0;      // peers refused by credentials or the client limit
  uint64_t timed_out = 0;    // connections closed at their deadline
  uint64_t idle_closed = 0;  // idle connections closed to make room for a new client
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
  // Applies a reloaded control.group / limits to new connections: Prepare (checks the group,
  // changes nothing) then Apply (cannot fail), so a reload applies whole or not at all.
  Status Reconfigure(const ControlServerOptions& options);
  static Result<PeerPolicy> Prepare(const ControlServerOptions& options);
  void Apply(const ControlServerOptions& options, PeerPolicy policy);
  const ControlServerStats& stats() const { return stats_; }
  int active_clients() const { return active_; }

 private:
  class Connection;
  ControlServer(boost::asio::io_context& io, ControlServerOptions options, ControlHandler handler,
                PeerPolicy policy);
  void Accept();
  // Closes the connection idle the longest, other than `except`; false when none is idle.
  bool CloseOldestIdle(const Connection* except);

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
