#include "agent/upload/http_post.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <memory>
#include <type_traits>

namespace seqpoint::daemon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One exchange on Stream (beast::tcp_stream, or TlsStream for https://).
template <class Stream>
class PostOp : public std::enable_shared_from_this<PostOp<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  PostOp(asio::io_context& io, Stream stream, HttpUrl url, std::string body, HttpHeaders headers,
         std::chrono::milliseconds timeout, TlsClientConfig tls,
         std::function<void(Result<HttpResponse>)> done)
      : tls_(std::move(tls)),
        resolver_(io),
        stream_(std::move(stream)),
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
    beast::get_lowest_layer(stream_).expires_after(timeout_);
    resolver_.async_resolve(url_.host, std::to_string(url_.port),
                            [self = this->shared_from_this()](beast::error_code ec,
                                                              tcp::resolver::results_type results) {
                              if (ec) return self->Fail("resolving", ec);
                              beast::get_lowest_layer(self->stream_)
                                  .async_connect(
                                      results, [self](beast::error_code cec, const tcp::endpoint&) {
                                        if (cec) return self->Fail("connecting to", cec);
                                        if constexpr (kTls) {
                                          self->Handshake();
                                        } else {
                                          self->Write();
                                        }
                                      });
                            });
  }

 private:
  void Handshake() {
    SSL* ssl = stream_.native_handle();
    const std::string& name = tls_.server_name;
    beast::error_code ec;
    (void)asio::ip::make_address(name, ec);
    const bool is_ip = !ec;
    // SNI carries DNS names only (RFC 6066 section 3).
    if (!is_ip && SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) {
      return Fail("setting SNI for", beast::error_code(static_cast<int>(ERR_get_error()),
                                                       asio::error::get_ssl_category()));
    }
    if (tls_.verify) {
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                     : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
      if (ok != 1) {
        return Fail(
            "setting the name to verify for",
            beast::error_code(static_cast<int>(ERR_get_error()), asio::error::get_ssl_category()));
      }
    }
    stream_.async_handshake(asio::ssl::stream_base::client,
                            [self = this->shared_from_this()](beast::error_code hec) {
                              if (hec) return self->Fail("TLS handshake with", hec);
                              self->Write();
                            });
  }

  void Write() {
    http::async_write(
        stream_, request_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
          if (ec) return self->Fail("sending to", ec);
          self->response_.body_limit(1 << 20);
          http::async_read(self->stream_, self->buffer_, self->response_,
                           [self](beast::error_code rec, size_t) {
                             if (rec) return self->Fail("reading the answer of", rec);
                             self->Close();
                             HttpResponse r;
                             r.status = static_cast<int>(self->response_.get().result_int());
                             r.body = self->response_.get().body();
                             self->done_(std::move(r));
                           });
        });
  }

  // The whole answer is in (Connection: close): no TLS close_notify exchange, which a server
  // may never answer; the socket just closes.
  void Close() {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  void Fail(const char* what, beast::error_code ec) {
    std::string reason = ec == beast::error::timeout ? "timed out" : ec.message();
    if constexpr (kTls) {
      if (ec.category() == asio::error::get_ssl_category() ||
          ec == asio::ssl::error::stream_truncated) {
        const long verify = SSL_get_verify_result(stream_.native_handle());
        if (verify != X509_V_OK) {
          if (reason.find("certificate verify failed") == std::string::npos) {
            reason += ": certificate verify failed";
          }
          reason += std::string(": ") + X509_verify_cert_error_string(verify);
        }
        std::string fix =
            ExplainTlsFailure(reason, verify, tls_.server_name,
                              SSL_get_certificate(stream_.native_handle()) != nullptr);
        if (!fix.empty()) reason += " (" + fix + ")";
      }
    }
    done_(Unavailable(std::string(what) + " " + url_.host + ":" + std::to_string(url_.port) + ": " +
                      reason));
  }

  TlsClientConfig tls_;  // first: its context outlives the stream
  tcp::resolver resolver_;
  Stream stream_;
  HttpUrl url_;
  std::chrono::milliseconds timeout_;
  std::function<void(Result<HttpResponse>)> done_;
  http::request<http::string_body> request_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> response_;
};

}  // namespace

void HttpPost(asio::io_context& io, const HttpUrl& url, std::string body, HttpHeaders headers,
              std::chrono::milliseconds timeout, const TlsClientConfig* tls,
              std::function<void(Result<HttpResponse>)> done) {
  if (!url.tls) {
    std::make_shared<PostOp<beast::tcp_stream>>(io, beast::tcp_stream(io), url, std::move(body),
                                                std::move(headers), timeout, TlsClientConfig{},
                                                std::move(done))
        ->Start();
    return;
  }
  if (tls == nullptr || tls->context == nullptr) {
    done(InvalidArgument("https://" + url.host + ": no TLS context (internal error)"));
    return;
  }
  std::make_shared<PostOp<TlsStream>>(io, TlsStream(io, *tls->context), url, std::move(body),
                                      std::move(headers), timeout, *tls, std::move(done))
      ->Start();
}

}  // namespace seqpoint::daemon
