#include "agent/daemon/http_post.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>

namespace seqpoint::daemon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

class PostOp : public std::enable_shared_from_this<PostOp> {
 public:
  PostOp(asio::io_context& io, HttpUrl url, std::string body, HttpHeaders headers,
         std::chrono::milliseconds timeout, std::function<void(Result<HttpResponse>)> done)
      : resolver_(io),
        stream_(io),
        url_(std::move(url)),
        timeout_(timeout),
        done_(std::move(done)) {
    request_.method(http::verb::post);
    request_.target(url_.target);
    request_.version(11);
    request_.set(http::field::host, url_.host + ":" + std::to_string(url_.port));
    request_.set(http::field::user_agent, "seqpointd");
    for (auto& [k, v] : headers) request_.set(k, v);
    request_.body() = std::move(body);
    request_.prepare_payload();
    request_.keep_alive(false);
  }

  void Start() {
    stream_.expires_after(timeout_);
    resolver_.async_resolve(
        url_.host, std::to_string(url_.port),
        [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
          if (ec) return self->Fail("resolving", ec);
          self->stream_.async_connect(results, [self](beast::error_code cec, const tcp::endpoint&) {
            if (cec) return self->Fail("connecting to", cec);
            self->Write();
          });
        });
  }

 private:
  void Write() {
    http::async_write(stream_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Fail("sending to", ec);
      self->response_.body_limit(1 << 20);
      http::async_read(self->stream_, self->buffer_, self->response_,
                       [self](beast::error_code rec, size_t) {
                         if (rec) return self->Fail("reading the answer of", rec);
                         beast::error_code ignored;
                         self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
                         HttpResponse r;
                         r.status = static_cast<int>(self->response_.get().result_int());
                         r.body = self->response_.get().body();
                         self->done_(std::move(r));
                       });
    });
  }

  void Fail(const char* what, beast::error_code ec) {
    std::string reason = ec == beast::error::timeout ? "timed out" : ec.message();
    done_(Unavailable(std::string(what) + " " + url_.host + ":" + std::to_string(url_.port) + ": " +
                      reason));
  }

  tcp::resolver resolver_;
  beast::tcp_stream stream_;
  HttpUrl url_;
  std::chrono::milliseconds timeout_;
  std::function<void(Result<HttpResponse>)> done_;
  http::request<http::string_body> request_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> response_;
};

}  // namespace

void HttpPost(asio::io_context& io, const HttpUrl& url, std::string body, HttpHeaders headers,
              std::chrono::milliseconds timeout, std::function<void(Result<HttpResponse>)> done) {
  std::make_shared<PostOp>(io, url, std::move(body), std::move(headers), timeout, std::move(done))
      ->Start();
}

}  // namespace seqpoint::daemon
