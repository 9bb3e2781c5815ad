// /metrics cannot be held hostage (issue 14): idle kept-alive connections, a burst of 500
// connections and a slow sender, each against a real MetricsServer over real TCP sockets. The
// clients are plain blocking sockets, so what is checked is what any client sees on the wire.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "agent/metrics/metrics_server.h"

using namespace seqpoint::daemon;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// A MetricsServer on its own io_context thread; stats are read on that thread.
class TestServer {
 public:
  explicit TestServer(MetricsServerOptions options) {
    options.listen = "127.0.0.1:0";
    auto s = MetricsServer::Start(io_, options, [] { return std::string("up 1\n"); });
    REQUIRE_MESSAGE(s.ok(), s.status().message());
    server_ = std::move(*s);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~TestServer() {
    boost::asio::post(io_, [this] { server_.reset(); });
    work_.reset();
    io_.stop();
    thread_.join();
  }
  int port() const { return server_->port(); }
  MetricsServerStats Stats() {
    std::promise<MetricsServerStats> p;
    boost::asio::post(io_, [&] { p.set_value(server_->stats()); });
    return p.get_future().get();
  }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
      io_.get_executor()};
  std::unique_ptr<MetricsServer> server_;
  std::thread thread_;
};

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

bool Send(int fd, const std::string& s) {
  return send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

const std::string kGet = "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n";

struct Response {
  int status = 0;     // 0: the connection ended (EOF or reset) before a whole response
  bool timed_out = false;
  std::string head;
  std::string body;
};

// Reads one whole response (head and Content-Length body) within `limit`.
Response ReadResponse(int fd, milliseconds limit = milliseconds(10000)) {
  Response r;
  std::string in;
  const auto end = Clock::now() + limit;
  while (true) {
    size_t head_end = in.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      size_t cl = in.find("Content-Length: ");
      size_t length = cl < head_end ? std::stoul(in.substr(cl + 16)) : 0;
      if (in.size() >= head_end + 4 + length) {
        r.head = in.substr(0, head_end);
        r.body = in.substr(head_end + 4, length);
        r.status = std::stoi(in.substr(9, 3));
        return r;
      }
    }
    auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) {
      r.timed_out = true;
      return r;
    }
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return r;
    in.append(buf, static_cast<size_t>(n));
  }
}

// Whether the server closed the connection (EOF or reset) within `limit`.
bool ClosedWithin(int fd, milliseconds limit) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(limit.count())) <= 0) return false;
  char c;
  return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

TEST_CASE("metrics server: 32 idle kept-alive connections do not delay a scrape") {
  TestServer server({});  // the defaults: 64 connections
  std::vector<int> idle;
  for (int i = 0; i < 32; ++i) {
    idle.push_back(Connect(server.port()));
    REQUIRE(Send(idle.back(), kGet));
    REQUIRE(ReadResponse(idle.back()).status == 200);  // and now kept alive, idle
  }
  auto start = Clock::now();
  int fd = Connect(server.port());
  REQUIRE(Send(fd, kGet));
  Response r = ReadResponse(fd);
  const double ms = MsSince(start);
  MESSAGE("scrape beside 32 idle kept-alive connections: " << ms << " ms");
  CHECK(r.status == 200);
  CHECK(r.body == "up 1\n");
  CHECK(ms < 2000);
  for (int f : idle) close(f);
  close(fd);
}

TEST_CASE("metrics server: at max_connections a new scrape closes the connection idle longest") {
  TestServer server({.max_connections = 8});
  std::vector<int> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(Connect(server.port()));
    REQUIRE(Send(idle.back(), kGet));
    REQUIRE(ReadResponse(idle.back()).status == 200);
  }
  // Past the grace that protects a connection whose request may still be on its way.
  std::this_thread::sleep_for(milliseconds(1200));
  for (int round = 0; round < 3; ++round) {
    auto start = Clock::now();
    int fd = Connect(server.port());
    REQUIRE(Send(fd, kGet));
    Response r = ReadResponse(fd);
    CHECK(r.status == 200);
    CHECK(MsSince(start) < 2000);
    close(fd);
  }
  CHECK(server.Stats().idle_closed >= 1);
  // The first idle connection (the oldest) was the one closed.
  CHECK(ClosedWithin(idle[0], milliseconds(2000)));
  for (int f : idle) close(f);
}

TEST_CASE("metrics server: 500 connections at once each get a response or a clean 503") {
  TestServer server({});
  // Every client keeps its connection open after its answer, so the 64 slots stay taken and
  // the rest must be refused: with a 503, never a bare close.
  std::vector<int> fds;
  for (int i = 0; i < 500; ++i) fds.push_back(Connect(server.port()));
  for (int fd : fds) REQUIRE(Send(fd, kGet));
  int ok = 0, unavailable = 0, other = 0, unanswered = 0;
  for (int fd : fds) {
    Response r = ReadResponse(fd);
    if (r.status == 200) {
      ++ok;
    } else if (r.status == 503) {
      ++unavailable;
      CHECK(r.head.find("Retry-After: 1") != std::string::npos);
      CHECK(r.head.find("Connection: close") != std::string::npos);
      CHECK(r.body.find("metrics.max_connections") != std::string::npos);
    } else if (r.status == 0) {
      ++unanswered;
    } else {
      ++other;
    }
  }
  MESSAGE("500 at once: " << ok << " answered 200, " << unavailable << " answered 503, "
                          << unanswered << " closed unanswered");
  CHECK(ok + unavailable == 500);
  CHECK(unanswered == 0);
  CHECK(other == 0);
  CHECK(ok >= 64);
  CHECK(server.Stats().rejected == static_cast<uint64_t>(unavailable));
  for (int fd : fds) close(fd);
  // Once they are gone, a scrape is served again.
  int fd = Connect(server.port());
  REQUIRE(Send(fd, kGet));
  CHECK(ReadResponse(fd).status == 200);
  close(fd);
}

TEST_CASE("metrics server: a slow sender is closed at header_timeout_ms and blocks no one") {
  TestServer server({.max_connections = 2, .header_timeout_ms = 500});
  int slow = Connect(server.port());
  REQUIRE(Send(slow, "GET /metrics HTTP/1.1\r\n"));
  // Slowloris: a header byte every 100 ms keeps the connection busy, never complete.
  auto start = Clock::now();
  bool closed = false;
  while (MsSince(start) < 5000 && !closed) {
    Send(slow, "X");
    closed = ClosedWithin(slow, milliseconds(100));
  }
  const double held = MsSince(start);
  MESSAGE("slow sender closed after " << held << " ms (metrics.header_timeout_ms = 500)");
  CHECK(closed);
  CHECK(held < 2000);
  CHECK(server.Stats().header_timed_out == 1);
  close(slow);
  // A connection that sends nothing at all is closed at the same limit.
  int silent = Connect(server.port());
  CHECK(ClosedWithin(silent, milliseconds(3000)));
  close(silent);
  // And a real scrape is still served.
  int fd = Connect(server.port());
  REQUIRE(Send(fd, kGet));
  CHECK(ReadResponse(fd).status == 200);
  close(fd);
  CHECK(server.Stats().header_timed_out == 2);
}

TEST_CASE("metrics server: a kept-alive connection is closed after idle_timeout_ms") {
  TestServer server({.idle_timeout_ms = 300});
  int fd = Connect(server.port());
  REQUIRE(Send(fd, kGet));
  REQUIRE(ReadResponse(fd).status == 200);
  CHECK(ClosedWithin(fd, milliseconds(3000)));
  close(fd);
  CHECK(server.Stats().idle_timed_out == 1);
}

TEST_CASE("metrics server: an oversized header is answered 400, not dropped") {
  TestServer server({});
  int fd = Connect(server.port());
  REQUIRE(Send(fd, "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'a') + "\r\n\r\n"));
  Response r = ReadResponse(fd);
  CHECK(r.status == 400);
  CHECK(r.body.find("header limit") != std::string::npos);
  close(fd);
}
