// seqpointd under systemd's watchdog (packaging/seqpointd.service: Type=notify, WatchdogSec=):
// the real binary, with NOTIFY_SOCKET pointed at a datagram socket of this test and
// WATCHDOG_USEC set, as systemd would. It must say READY=1, send WATCHDOG=1 at half the
// interval, and stop when its event loop is wedged (SIGSTOP here), which is what makes systemd
// restart it. No systemd runs as PID 1 in the test container, so the restart itself is systemd's
// part and is not exercised here; the README's troubleshooting section gives its timing.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agent/testing/seqpointd_process.h"
#include "agent/testing/test_harness.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using Clock = std::chrono::steady_clock;

namespace {

// The systemd side of sd_notify(3): a datagram socket that records every message.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~NotifySocket() { close(fd_); }

  struct Message {
    std::string text;
    Clock::time_point at;
  };
  // The next message within `limit`, or an empty one.
  Message Next(std::chrono::milliseconds limit) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(limit.count())) <= 0) return {};
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    return {n > 0 ? std::string(buf, static_cast<size_t>(n)) : "", Clock::now()};
  }
  // Every message until `limit` passes.
  std::vector<Message> During(std::chrono::milliseconds limit) {
    std::vector<Message> out;
    auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
      Message m = Next(left);
      if (!m.text.empty()) out.push_back(m);
    }
    return out;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// Sets environment variables for the children started in its scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

}  // namespace

TEST_CASE("agent seqpointd: READY=1, watchdog keep-alives from the loop, none once it is wedged") {
  TempDir dir;
  NotifySocket notify(dir.File("notify.sock"));
  ScopedEnv socket_env("NOTIFY_SOCKET", dir.File("notify.sock"));
  ScopedEnv watchdog_env("WATCHDOG_USEC", "400000");  // WatchdogSec=400ms: WATCHDOG=1 every 200
  const auto started = Clock::now();
  Seqpointd d(dir, {"--replay", RecordedTrace() + "@job", "--replay-rows", "50",
                    "--replay-no-exit"},
              "watchdog.log");
  NotifySocket::Message ready = notify.Next(std::chrono::milliseconds(60000));
  REQUIRE_MESSAGE(ready.text.find("READY=1") != std::string::npos, d.Log());
  const double ready_ms =
      std::chrono::duration<double, std::milli>(ready.at - started).count();
  MESSAGE("exec to READY=1: " << ready_ms << " ms");
  CHECK(d.Ready());  // READY=1 means the control socket answers

  auto alive = notify.During(std::chrono::milliseconds(2000));
  int keepalives = 0;
  for (const auto& m : alive) keepalives += m.text == "WATCHDOG=1";
  MESSAGE("keep-alives in 2 s at WATCHDOG_USEC=400000: " << keepalives);
  CHECK(keepalives >= 5);  // 10 expected; a loaded machine may delay a few
  CHECK(keepalives <= 12);

  // Wedged: the loop runs no more, and the keep-alives stop with it.
  d.Signal(SIGSTOP);
  const auto stopped = Clock::now();
  auto wedged = notify.During(std::chrono::milliseconds(1500));
  for (const auto& m : wedged) {
    // One may have been on its way when the signal landed.
    CHECK(m.at - stopped < std::chrono::milliseconds(100));
  }
  CHECK(wedged.size() <= 1);
  // Past 400 ms without a keep-alive, systemd would have declared it hung.

  // Unwedged, it goes on (a watchdog reset by systemd restarts it instead).
  d.Signal(SIGCONT);
  NotifySocket::Message again = notify.Next(std::chrono::milliseconds(5000));
  CHECK(again.text == "WATCHDOG=1");

  d.Signal(SIGTERM);
  bool stopping = false;
  for (const auto& m : notify.During(std::chrono::milliseconds(3000))) {
    stopping = stopping || m.text == "STOPPING=1";
  }
  CHECK(stopping);
  CHECK(d.Wait() == 0);
}

TEST_CASE("agent seqpointd: WATCHDOG_PID of another process means no keep-alives") {
  TempDir dir;
  NotifySocket notify(dir.File("notify.sock"));
  ScopedEnv socket_env("NOTIFY_SOCKET", dir.File("notify.sock"));
  ScopedEnv watchdog_env("WATCHDOG_USEC", "400000");
  ScopedEnv pid_env("WATCHDOG_PID", "1");  // the keep-alives are PID 1's to send, not ours
  Seqpointd d(dir, {"--replay", RecordedTrace() + "@job", "--replay-rows", "50",
                    "--replay-no-exit"},
              "nowatchdog.log");
  NotifySocket::Message ready = notify.Next(std::chrono::milliseconds(60000));
  REQUIRE(ready.text.find("READY=1") != std::string::npos);
  CHECK(notify.During(std::chrono::milliseconds(1000)).empty());
}
