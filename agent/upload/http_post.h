// One asynchronous HTTP/1.1 POST with Boost.Beast over plain TCP, or over TLS (OpenSSL through
// Boost.Asio SSL) for https:// URLs: resolve, connect, [handshake,] write, read, bounded by a
// timeout covering the whole exchange. Used by the remote-write uploader.
//
// TLS: the peer's certificate chain is verified by the context (upload_security.h) and its name
// against TlsClientConfig::server_name (a DNS name or an IP address, RFC 6125 rules, no partial
// wildcards), sent as SNI unless it is an IP address (RFC 6066 forbids that). A failed handshake
// names OpenSSL's reason, the certificate verification error and the config key to change.
//
// Threads: runs on the given io_context; the callback runs there too, exactly once.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "agent/config/config_validate.h"
#include "agent/upload/upload_security.h"
#include "common/status.h"

namespace seqpoint::daemon {

struct HttpResponse {
  int status = 0;
  std::string body;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// On a transport failure (refused, timeout, reset, TLS) the callback gets Unavailable. `tls` is
// required for an https:// URL and ignored for http://.
void HttpPost(boost::asio::io_context& io, const HttpUrl& url, std::string body,
              HttpHeaders headers, std::chrono::milliseconds timeout, const TlsClientConfig* tls,
              std::function<void(Result<HttpResponse>)> done);

}  // namespace seqpoint::daemon
