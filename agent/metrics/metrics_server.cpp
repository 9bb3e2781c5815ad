#include "agent/metrics/metrics_server.h"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <optional>

#include "agent/config/config_validate.h"
#include "agent/config/log.h"

namespace seqpoint::daemon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kHeaderLimit = 8192;
// A scrape's answer must be read within this (Prometheus' default scrape_timeout is 10 s).
constexpr auto kWriteTimeout = std::chrono::seconds(10);
// A connection idle for less than this is not closed to make room: its client may have
// connected a moment ago and be about to send (closing it then would drop it unanswered).
constexpr auto kEvictGrace = std::chrono::seconds(1);
// A refused connection's request is read (so that closing it sends FIN, not RST, and the 503
// is not lost), and the 503 written, within this each.
constexpr auto kRefusalTimeout = std::chrono::seconds(1);

std::chrono::milliseconds Ms(int64_t ms) { return std::chrono::milliseconds(ms); }

// After a last answer: half-closes, then reads and discards until the client closes or the
// stream's deadline, and calls `done`. Closing a socket with input unread sends RST, which can
// destroy the answer still waiting in the client's buffer.
void DrainThenClose(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                    std::function<void()> done) {
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  buffer.clear();
  stream.async_read_some(buffer.prepare(buffer.max_size()),
                         [&stream, &buffer, done](beast::error_code ec, size_t) {
                           if (ec) return done();
                           buffer.clear();
                           stream.async_read_some(buffer.prepare(buffer.max_size()),
                                                  [done](beast::error_code, size_t) { done(); });
                         });
}

}  // namespace

class MetricsServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(MetricsServer* server, tcp::socket socket)
      : server_(server), alive_(server->alive_), stream_(std::move(socket)) {
    ++server_->sessions_;
  }
  ~Session() { Release(); }

  void Start() { WaitForRequest(); }

  // Waiting for a request of which no byte has come, for at least kEvictGrace: closing it
  // loses nothing (an HTTP client retries a GET on a kept-alive connection the server closed).
  bool idle() const {
    if (!waiting_ || !counted_ || buffer_.size() > 0) return false;
    beast::error_code ec;
    if (stream_.socket().available(ec) > 0 || ec) return false;
    return Clock::now() - idle_since_ >= kEvictGrace;
  }
  Clock::time_point idle_since() const { return idle_since_; }

  // Closes the socket and frees the slot at once (the pending handler runs later).
  void Close() {
    if (!counted_) return;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    Release();
  }

 private:
  void Release() {
    if (!counted_) return;
    counted_ = false;
    if (!*alive_) return;
    --server_->sessions_;
    server_->Released();
  }

  // Until the first byte of the next request: header_timeout_ms from the accept for a new
  // connection, idle_timeout_ms on a kept-alive one.
  void WaitForRequest() {
    waiting_ = true;
    idle_since_ = Clock::now();
    if (buffer_.size() > 0) return ReadRequest();  // a pipelined request is here already
    if (first_) {
      header_deadline_ = idle_since_ + Ms(server_->options_.header_timeout_ms);
      stream_.expires_at(header_deadline_);
    } else {
      stream_.expires_after(Ms(server_->options_.idle_timeout_ms));
    }
    stream_.async_read_some(buffer_.prepare(kHeaderLimit),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->buffer_.commit(n);
                              self->OnFirstBytes(ec);
                            });
  }

  void OnFirstBytes(beast::error_code ec) {
    if (!*alive_ || !counted_) return;  // closed meanwhile (room made for a new connection)
    waiting_ = false;
    if (ec == beast::error::timeout) {
      ++(first_ ? server_->stats_.header_timed_out : server_->stats_.idle_timed_out);
      return Close();
    }
    if (ec) return Close();
    ReadRequest();
  }

  void ReadRequest() {
    waiting_ = false;
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(0);
    if (!first_) header_deadline_ = Clock::now() + Ms(server_->options_.header_timeout_ms);
    stream_.expires_at(header_deadline_);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->OnRequest(ec);
                     });
  }

  void OnRequest(beast::error_code ec) {
    if (!*alive_ || !counted_) return;
    if (ec == beast::error::timeout) {
      ++server_->stats_.header_timed_out;
      SEQPOINT_LOG(kDebug, "metrics: closed a client whose request header took longer than "
                           "metrics.header_timeout_ms");
      return Close();
    }
    // A client that went away is closed; one whose request is not HTTP is told so.
    const auto& http_errors = http::make_error_code(http::error::header_limit).category();
    if (ec == http::error::end_of_stream || (ec && ec.category() != http_errors)) return Close();
    auto res = std::make_shared<http::response<http::string_body>>();
    if (ec) {
      // A malformed or oversized request: said so, then closed (the rest is not read).
      res->version(11);
      res->result(http::status::bad_request);
      res->keep_alive(false);
      res->body() = "bad request: " + ec.message() + " (header limit 8 KiB, no body)\n";
    } else {
      Answer(parser_->get(), *res);
    }
    res->set(http::field::server, "seqpointd");
    res->prepare_payload();
    stream_.expires_after(kWriteTimeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code wec, size_t) {
                        if (wec || !*self->alive_ || !self->counted_) return self->Close();
                        if (!res->keep_alive()) return self->Linger();
                        self->first_ = false;
                        self->WaitForRequest();
                      });
  }

  void Linger() {
    stream_.expires_after(kRefusalTimeout);
    DrainThenClose(stream_, buffer_, [self = shared_from_this()] { self->Close(); });
  }

  void Answer(const http::request<http::empty_body>& req,
              http::response<http::string_body>& res) {
    res.version(req.version());
    res.keep_alive(req.keep_alive());
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res.result(http::status::method_not_allowed);
      res.set(http::field::allow, "GET, HEAD");
      res.body() = "only GET\n";
    } else if (req.target() == "/metrics") {
      ++server_->stats_.scrapes;
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      if (req.method() == http::verb::get) res.body() = server_->provider_();
    } else if (req.target() == "/") {
      res.result(http::status::ok);
      res.body() = "seqpointd: see /metrics\n";
    } else {
      res.result(http::status::not_found);
      res.body() = "not found; try /metrics\n";
    }
  }

  MetricsServer* server_;
  std::shared_ptr<bool> alive_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{kHeaderLimit};
  std::optional<http::request_parser<http::empty_body>> parser_;
  Clock::time_point idle_since_ = Clock::now();
  Clock::time_point header_deadline_;
  bool first_ = true;     // no request answered yet on this connection
  bool waiting_ = false;  // waiting for the first byte of a request
  bool counted_ = true;   // holds one of the max_connections slots (until closed)
};

// A connection over the limit: its request read, "503" written, then closed.
class MetricsServer::Refusal : public std::enable_shared_from_this<Refusal> {
 public:
  Refusal(MetricsServer* server, tcp::socket socket)
      : server_(server), alive_(server->alive_), stream_(std::move(socket)) {
    ++server_->refusals_;
    limit_ = server->options_.max_connections;
  }
  ~Refusal() {
    if (!*alive_) return;
    --server_->refusals_;
    server_->Released();
  }

  void Start() {
    parser_.header_limit(kHeaderLimit);
    parser_.body_limit(0);
    stream_.expires_after(kRefusalTimeout);
    http::async_read(stream_, buffer_, parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->Answer(ec ? 11 : self->parser_.get().version());
                     });
  }

 private:
  void Answer(unsigned version) {
    res_.version(version);
    res_.result(http::status::service_unavailable);
    res_.keep_alive(false);
    res_.set(http::field::server, "seqpointd");
    res_.set(http::field::retry_after, "1");
    res_.set(http::field::content_type, "text/plain; charset=utf-8");
    res_.body() = "seqpointd: /metrics is serving " + std::to_string(limit_) +
                  " connections, all mid-request (metrics.max_connections); retry\n";
    res_.prepare_payload();
    stream_.expires_after(kRefusalTimeout);
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->stream_.close();
      self->stream_.expires_after(kRefusalTimeout);
      DrainThenClose(self->stream_, self->buffer_, [self] { self->stream_.close(); });
    });
  }

  MetricsServer* server_;
  std::shared_ptr<bool> alive_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{kHeaderLimit};
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> res_;
  int64_t limit_ = 0;
};

MetricsServer::MetricsServer(asio::io_context& io, MetricsServerOptions options,
                             ExpositionProvider provider)
    : acceptor_(io), options_(std::move(options)), provider_(std::move(provider)) {}

MetricsServer::~MetricsServer() {
  Stop();
  *alive_ = false;
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(asio::io_context& io,
                                                            MetricsServerOptions options,
                                                            ExpositionProvider provider) {
  const std::string listen = options.listen;
  auto hp = ParseHostPort(listen);
  if (!hp.ok()) return hp.status().WithContext("metrics.listen");
  boost::system::error_code ec;
  auto address = asio::ip::make_address(hp->host, ec);
  if (ec) {
    return InvalidArgument("metrics.listen '" + listen +
                           "': the host must be a numeric address (e.g. 127.0.0.1 or ::1)");
  }
  std::unique_ptr<MetricsServer> server(
      new MetricsServer(io, std::move(options), std::move(provider)));
  tcp::endpoint endpoint(address, hp->port);
  server->acceptor_.open(endpoint.protocol(), ec);
  if (!ec) server->acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) server->acceptor_.bind(endpoint, ec);
  if (!ec) server->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return IoError("cannot serve /metrics on " + listen + ": " + ec.message() +
                   " (is another exporter on that port? set metrics.listen)");
  }
  server->port_ = server->acceptor_.local_endpoint().port();
  server->Accept();
  return server;
}

bool MetricsServer::AtLimits() const {
  return sessions_ >= options_.max_connections && refusals_ >= options_.max_connections;
}

void MetricsServer::Accept() {
  // At both limits the next connection waits in the listen backlog: accepting it only to
  // close it unanswered is what this server never does.
  if (accepting_ || stopped_ || AtLimits()) return;
  accepting_ = true;
  std::weak_ptr<bool> alive = alive_;
  acceptor_.async_accept([this, alive](boost::system::error_code ec, tcp::socket socket) {
    auto live = alive.lock();
    if (!live || !*live) return;
    accepting_ = false;
    if (stopped_ || !acceptor_.is_open()) return;
    if (ec) {
      // Out of descriptors, most likely: try again shortly rather than spin.
      SEQPOINT_LOG(kWarn, "metrics: accept failed: " + ec.message());
      auto timer = std::make_shared<asio::steady_timer>(acceptor_.get_executor(),
                                                        std::chrono::milliseconds(100));
      accepting_ = true;
      timer->async_wait([this, alive, timer](boost::system::error_code) {
        auto again = alive.lock();
        if (!again || !*again) return;
        accepting_ = false;
        Accept();
      });
      return;
    }
    Admit(std::move(socket));
    Accept();
  });
}

void MetricsServer::Admit(tcp::socket socket) {
  if (sessions_ < options_.max_connections || CloseOldestIdle()) {
    auto session = std::make_shared<Session>(this, std::move(socket));
    session_list_.remove_if([](const auto& w) { return w.expired(); });
    session_list_.push_back(session);
    session->Start();
    return;
  }
  ++stats_.rejected;
  SEQPOINT_LOG(kDebug, "metrics: at metrics.max_connections (" +
                           std::to_string(options_.max_connections) +
                           "), every one mid-request: answered 503");
  std::make_shared<Refusal>(this, std::move(socket))->Start();
}

bool MetricsServer::CloseOldestIdle() {
  std::shared_ptr<Session> oldest;
  for (const auto& weak : session_list_) {
    auto s = weak.lock();
    if (!s || !s->idle()) continue;
    if (!oldest || s->idle_since() < oldest->idle_since()) oldest = s;
  }
  if (!oldest) return false;
  ++stats_.idle_closed;
  oldest->Close();
  return true;
}

void MetricsServer::Released() {
  if (!stopped_) Accept();
}

void MetricsServer::Reconfigure(const MetricsServerOptions& options) {
  options_.max_connections = options.max_connections;
  options_.idle_timeout_ms = options.idle_timeout_ms;
  options_.header_timeout_ms = options.header_timeout_ms;
  Accept();  // a higher limit may let a paused accept go on
}

void MetricsServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  for (auto& weak : session_list_) {
    if (auto s = weak.lock()) s->Close();
  }
  session_list_.clear();
}

}  // namespace seqpoint::daemon
