#include "agent/metrics/metrics_server.h"

#include <boost/asio/ip/address.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <optional>

#include "agent/config/config_validate.h"
#include "agent/config/log.h"

namespace seqpoint::daemon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

constexpr int kMaxSessions = 32;

class MetricsServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(MetricsServer* server, tcp::socket socket)
      : server_(server), alive_(server->alive_), stream_(std::move(socket)) {
    ++server_->sessions_;
  }
  ~Session() {
    if (*alive_) --server_->sessions_;
  }

  void Read() {
    parser_.emplace();
    parser_->header_limit(8192);
    parser_->body_limit(0);
    stream_.expires_after(std::chrono::seconds(30));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec || !*alive_) return Close();
    const auto& req = parser_->get();
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(req.version());
    res->keep_alive(req.keep_alive());
    res->set(http::field::server, "seqpointd");
    res->set(http::field::content_type, "text/plain; charset=utf-8");
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res->result(http::status::method_not_allowed);
      res->set(http::field::allow, "GET, HEAD");
      res->body() = "only GET\n";
    } else if (req.target() == "/metrics") {
      ++server_->scrapes_;
      res->result(http::status::ok);
      res->set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      if (req.method() == http::verb::get) res->body() = server_->provider_();
    } else if (req.target() == "/") {
      res->result(http::status::ok);
      res->body() = "seqpointd: see /metrics\n";
    } else {
      res->result(http::status::not_found);
      res->body() = "not found; try /metrics\n";
    }
    res->prepare_payload();
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code wec, size_t) {
                        if (wec || !res->keep_alive()) return self->Close();
                        self->Read();
                      });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  MetricsServer* server_;
  std::shared_ptr<bool> alive_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{8192};
  std::optional<http::request_parser<http::empty_body>> parser_;
};

MetricsServer::MetricsServer(asio::io_context& io, ExpositionProvider provider)
    : acceptor_(io), provider_(std::move(provider)) {}

MetricsServer::~MetricsServer() {
  Stop();
  *alive_ = false;
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(asio::io_context& io,
                                                            const std::string& listen,
                                                            ExpositionProvider provider) {
  auto hp = ParseHostPort(listen);
  if (!hp.ok()) return hp.status().WithContext("metrics.listen");
  boost::system::error_code ec;
  auto address = asio::ip::make_address(hp->host, ec);
  if (ec) {
    return InvalidArgument("metrics.listen '" + listen +
                           "': the host must be a numeric address (e.g. 127.0.0.1 or ::1)");
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer(io, std::move(provider)));
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

void MetricsServer::Accept() {
  std::weak_ptr<bool> alive = alive_;
  acceptor_.async_accept([this, alive](boost::system::error_code ec, tcp::socket socket) {
    auto live = alive.lock();
    if (!live || !*live || !acceptor_.is_open()) return;
    if (!ec && sessions_ < kMaxSessions) {
      std::make_shared<Session>(this, std::move(socket))->Read();
    } else if (ec) {
      SEQPOINT_LOG(kWarn, "metrics: accept failed: " + ec.message());
    }
    Accept();
  });
}

void MetricsServer::Stop() {
  boost::system::error_code ec;
  acceptor_.close(ec);
}

}  // namespace seqpoint::daemon
