// One asynchronous HTTP/1.1 POST over plain TCP with Boost.Beast (resolve, connect, write, read),
// bounded by a timeout covering the whole exchange. Used by the remote-write uploader.
//
// Threads: runs on the given io_context; the callback runs there too, exactly once.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "agent/daemon/config_validate.h"
#include "common/status.h"

namespace seqpoint::daemon {

struct HttpResponse {
  int status = 0;
  std::string body;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// On a transport failure (refused, timeout, reset) the callback gets Unavailable.
void HttpPost(boost::asio::io_context& io, const HttpUrl& url, std::string body,
              HttpHeaders headers, std::chrono::milliseconds timeout,
              std::function<void(Result<HttpResponse>)> done);

}  // namespace seqpoint::daemon
