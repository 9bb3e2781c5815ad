#include "agent/control/control_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <filesystem>

#include "agent/config/log.h"

namespace seqpoint::daemon {

namespace asio = boost::asio;
using asio::local::stream_protocol;

class ControlServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ControlServer* server, stream_protocol::socket socket)
      : server_(server),
        alive_(server->alive_),
        socket_(std::move(socket)),
        buffer_(static_cast<size_t>(server->options_.max_request_bytes)),
        timer_(socket_.get_executor()),
        idle_since_(std::chrono::steady_clock::now()) {
    ++server_->active_;
  }
  ~Connection() { Release(); }

  void Start() {
    auto peer = ReadPeerCredentials(socket_.native_handle());
    Status st = peer.ok() ? server_->policy_.Check(*peer) : peer.status();
    if (!st.ok()) {
      ++server_->stats_.refused;
      SEQPOINT_LOG(kWarn, "control: refused: " + st.message());
      WriteThenClose(ErrorResponseLine(st));
      return;
    }
    if (server_->active_ > server_->options_.max_clients && !server_->CloseOldestIdle(this)) {
      ++server_->stats_.refused;
      WriteThenClose(ErrorResponseLine(
          Unavailable("seqpointd serves at most " + std::to_string(server_->options_.max_clients) +
                      " control clients at once (control.max_clients), all of them mid-request; "
                      "retry later")));
      return;
    }
    ReadNext();
  }

  // Closes the socket and frees the slot at once (the pending handlers run later).
  void Close() {
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.close(ignored);
    Release();
  }

  // Waiting for a request of which no byte has come yet: closing it loses nothing.
  bool idle() const { return waiting_ && counted_ && buffer_.size() == 0; }
  std::chrono::steady_clock::time_point idle_since() const { return idle_since_; }

 private:
  void Release() {
    if (counted_ && *alive_) --server_->active_;
    counted_ = false;
  }

  // The deadline of the current read or write: past it the client is closed.
  void ArmDeadline() {
    auto self = shared_from_this();
    timer_.expires_after(std::chrono::milliseconds(server_->options_.client_timeout_ms));
    timer_.async_wait([self](boost::system::error_code ec) {
      if (ec || !*self->alive_ || !self->counted_) return;
      ++self->server_->stats_.timed_out;
      SEQPOINT_LOG(kDebug, std::string("control: closed a client that ") +
                               (self->waiting_ ? "sent no full request" : "read no answer") +
                               " within control.client_timeout_ms (" +
                               std::to_string(self->server_->options_.client_timeout_ms) + " ms)");
      self->Close();
    });
  }

  void ReadNext() {
    auto self = shared_from_this();
    waiting_ = true;
    idle_since_ = std::chrono::steady_clock::now();
    ArmDeadline();
    asio::async_read_until(socket_, buffer_, '\n',
                           [self](boost::system::error_code ec, size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(boost::system::error_code ec, size_t n) {
    if (!*alive_) return;
    waiting_ = false;
    if (!counted_) return;  // closed meanwhile (deadline, or room made for a new client)
    if (ec == asio::error::not_found) {  // buffer full and no newline: oversized request
      ++server_->stats_.errors;
      WriteThenClose(ErrorResponseLine(InvalidArgument(
          "control request longer than " + std::to_string(server_->options_.max_request_bytes) +
          " bytes (control.max_request_bytes); requests are one short JSON line")));
      return;
    }
    if (ec) {
      Close();
      return;
    }
    std::string line(asio::buffers_begin(buffer_.data()), asio::buffers_begin(buffer_.data()) + n);
    buffer_.consume(n);
    line.pop_back();  // '\n'
    ++server_->stats_.requests;
    auto request = ParseControlRequest(line);
    std::string response;
    if (!request.ok()) {
      ++server_->stats_.errors;
      response = ErrorResponseLine(request.status());
    } else {
      auto result = server_->handler_(*request);
      response = result.ok() ? OkResponseLine(*result) : ErrorResponseLine(result.status());
      if (!result.ok()) ++server_->stats_.errors;
    }
    out_ = std::move(response);
    auto self = shared_from_this();
    ArmDeadline();
    asio::async_write(socket_, asio::buffer(out_), [self](boost::system::error_code wec, size_t) {
      if (wec || !*self->alive_ || !self->counted_) return self->Close();
      self->ReadNext();
    });
  }

  void WriteThenClose(std::string line) {
    out_ = std::move(line);
    auto self = shared_from_this();
    waiting_ = false;
    ArmDeadline();
    asio::async_write(socket_, asio::buffer(out_),
                      [self](boost::system::error_code, size_t) { self->Close(); });
  }

  ControlServer* server_;
  std::shared_ptr<bool> alive_;
  stream_protocol::socket socket_;
  asio::streambuf buffer_;
  asio::steady_timer timer_;
  std::string out_;
  std::chrono::steady_clock::time_point idle_since_;  // when the current wait for a request began
  bool waiting_ = false;                              // a read of the next request is under way
  bool counted_ = true;  // holds one of the max_clients slots (until closed)

  friend class ControlServer;
};

namespace {

// A socket file left by a crashed daemon is removed; one that answers belongs to a live daemon.
Status ClearStaleSocket(asio::io_context& io, const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();
  if (!S_ISSOCK(st.st_mode)) {
    return InvalidArgument("control socket path '" + path +
                           "' exists and is not a socket; remove it or set control.socket");
  }
  stream_protocol::socket probe(io);
  boost::system::error_code ec;
  probe.connect(stream_protocol::endpoint(path), ec);
  if (!ec) {
    return Unavailable("another seqpointd is answering on '" + path +
                       "'; stop it first or set control.socket / --runtime-dir");
  }
  std::error_code fs_ec;
  std::filesystem::remove(path, fs_ec);
  return Status::Ok();
}

}  // namespace

ControlServer::ControlServer(asio::io_context& io, ControlServerOptions options,
                             ControlHandler handler, PeerPolicy policy)
    : io_(io),
      options_(std::move(options)),
      handler_(std::move(handler)),
      policy_(std::move(policy)),
      acceptor_(io) {}

ControlServer::~ControlServer() {
  Stop();
  *alive_ = false;
}

Result<std::unique_ptr<ControlServer>> ControlServer::Start(asio::io_context& io,
                                                            ControlServerOptions options,
                                                            ControlHandler handler) {
  auto policy = PeerPolicy::Create(options.group);
  if (!policy.ok()) return policy.status();
  const std::string path = options.socket_path;
  std::error_code fs_ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), fs_ec);
  SEQPOINT_RETURN_IF_ERROR(ClearStaleSocket(io, path));
  std::unique_ptr<ControlServer> server(
      new ControlServer(io, std::move(options), std::move(handler), std::move(*policy)));
  boost::system::error_code ec;
  server->acceptor_.open(stream_protocol(), ec);
  // Created 0660 from the start (umask during bind), so no window exists where others connect.
  mode_t old = umask(0117);
  if (!ec) server->acceptor_.bind(stream_protocol::endpoint(path), ec);
  umask(old);
  if (!ec) server->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return IoError("cannot listen on control socket '" + path + "': " + ec.message() +
                   " (check daemon.runtime_dir / control.socket and permissions)");
  }
  if (auto gid = server->policy_.group(); gid && chown(path.c_str(), -1, *gid) != 0) {
    SEQPOINT_LOG(kWarn, "control: cannot give '" + path + "' to group " + server->options_.group +
                            "; only root can connect (run seqpointd as root)");
  }
  server->Accept();
  return server;
}

void ControlServer::Accept() {
  std::weak_ptr<bool> alive = alive_;
  acceptor_.async_accept(
      [this, alive](boost::system::error_code ec, stream_protocol::socket socket) {
        auto live = alive.lock();
        if (!live || !*live || stopped_) return;
        if (!ec) {
          auto conn = std::make_shared<Connection>(this, std::move(socket));
          connections_.remove_if([](const auto& w) { return w.expired(); });
          connections_.push_back(conn);
          conn->Start();
        } else {
          SEQPOINT_LOG(kWarn, "control: accept failed: " + ec.message());
        }
        Accept();
      });
}

bool ControlServer::CloseOldestIdle(const Connection* except) {
  std::shared_ptr<Connection> oldest;
  for (const auto& weak : connections_) {
    auto conn = weak.lock();
    if (!conn || conn.get() == except || !conn->idle()) continue;
    if (!oldest || conn->idle_since() < oldest->idle_since()) oldest = conn;
  }
  if (!oldest) return false;
  ++stats_.idle_closed;
  SEQPOINT_LOG(kDebug, "control: at control.max_clients (" + std::to_string(options_.max_clients) +
                           "): closed the client idle the longest for a new one");
  oldest->Close();
  return true;
}

Status ControlServer::Reconfigure(const ControlServerOptions& options) {
  auto policy = Prepare(options);
  if (!policy.ok()) return policy.status();
  Apply(options, std::move(*policy));
  return Status::Ok();
}

Result<PeerPolicy> ControlServer::Prepare(const ControlServerOptions& options) {
  auto policy = PeerPolicy::Create(options.group);
  if (!policy.ok()) return policy.status().WithContext("control.group");
  return policy;
}

void ControlServer::Apply(const ControlServerOptions& options, PeerPolicy policy) {
  policy_ = std::move(policy);
  options_.group = options.group;
  options_.max_clients = options.max_clients;
  options_.max_request_bytes = options.max_request_bytes;  // applies to new connections
  options_.client_timeout_ms = options.client_timeout_ms;  // from each connection's next wait
}

void ControlServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  for (auto& weak : connections_) {
    if (auto conn = weak.lock()) conn->Close();
  }
  connections_.clear();
  std::error_code fs_ec;
  std::filesystem::remove(options_.socket_path, fs_ec);
}

}  // namespace seqpoint::daemon
