// The control socket: protocol errors, size limits, client limits, deadlines and peer
// credentials.
#include <doctest/doctest.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <vector>

#include "agent/testing/test_harness.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

json Line(const DaemonHarness& h, const std::string& line) {
  auto r = SendControlLine(h.socket(), line);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  json j = json::parse(*r, nullptr, false);
  REQUIRE(!j.is_discarded());
  return j;
}

// Connects as uid/gid 65534 (nobody/nogroup) in a child process; returns the response line.
std::string RequestAsNobody(const std::string& socket) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    auto r = SendControlLine(socket, "{\"cmd\": \"status\"}");
    std::string out = r.ok() ? *r : "client error: " + r.status().ToString();
    (void)!write(fds[1], out.data(), out.size());
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return out;
}

// A connected client socket that sends nothing.
int ConnectTo(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// Whether the server closes `fd` (EOF or reset) within timeout_ms; data sent first is skipped.
bool ClosedByServer(int fd, int timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    end - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
  }
}

}  // namespace

TEST_CASE("agent control: status, runs and show answer, unknown runs are a clear error") {
  TempDir dir;
  DaemonHarness h;
  REQUIRE(h.Start(DaemonHarness::TestConfig(dir), {}).ok());
  ControlRequest status;
  status.cmd = "status";
  auto s = h.Request(status);
  REQUIRE_MESSAGE(s.ok(), s.status().ToString());
  CHECK((*s)["pid"] == getpid());
  CHECK((*s)["runs_active"] == 0);
  auto runs = h.Runs(true);
  REQUIRE(runs.ok());
  CHECK((*runs)["runs"].empty());
  auto show = h.Show("no-such-run");
  REQUIRE(!show.ok());
  CHECK(show.status().code() == seqpoint::ErrorCode::kNotFound);
  CHECK(show.status().message().find("seqpoint runs") != std::string::npos);
}

TEST_CASE("agent control: malformed requests get an error naming the problem") {
  TempDir dir;
  DaemonHarness h;
  REQUIRE(h.Start(DaemonHarness::TestConfig(dir), {}).ok());
  json j = Line(h, "this is not json");
  CHECK(j["ok"] == false);
  CHECK(j["error"].get<std::string>().find("not a JSON object") != std::string::npos);
  j = Line(h, "[1, 2]");
  CHECK(j["ok"] == false);
  j = Line(h, R"({"cmd": "reboot"})");
  CHECK(j["error"].get<std::string>().find("unknown control command 'reboot'") !=
        std::string::npos);
  j = Line(h, R"({"cmd": "runs", "colour": 1})");
  CHECK(j["error"].get<std::string>().find("unknown field 'colour'") != std::string::npos);
  j = Line(h, R"({"cmd": "runs", "limit": "ten"})");
  CHECK(j["error"].get<std::string>().find("'limit' must be a non-negative integer") !=
        std::string::npos);
  j = Line(h, R"({"cmd": "show"})");
  CHECK(j["error"].get<std::string>().find("needs a run") != std::string::npos);
  j = Line(h, "{\"cmd\": \"status\", \"x\": \"\xff\xfe\"}");  // invalid UTF-8
  CHECK(j["ok"] == false);
  // The daemon still answers after all of that.
  j = Line(h, R"({"cmd": "status"})");
  CHECK(j["ok"] == true);
}

TEST_CASE("agent control: an oversized request is refused and the connection closed") {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.control_max_request_bytes = 4096;
  DaemonHarness h;
  REQUIRE(h.Start(cfg, {}).ok());
  std::string huge = R"({"cmd": "show", "run": ")" + std::string(100000, 'x') + "\"}";
  json j = Line(h, huge);
  CHECK(j["ok"] == false);
  CHECK(j["error"].get<std::string>().find("longer than 4096 bytes") != std::string::npos);
  std::string deep(3000, '[');  // nesting within the limit: parsed without harm
  j = Line(h, deep);
  CHECK(j["ok"] == false);
  j = Line(h, R"({"cmd": "status"})");
  CHECK(j["ok"] == true);
}

TEST_CASE("agent control: clients beyond control.max_clients, all mid-request, are refused") {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.control_max_clients = 2;
  cfg.control_client_timeout_ms = 60000;
  DaemonHarness h;
  REQUIRE(h.Start(cfg, {}).ok());
  // Half a request each: neither is idle, so neither makes room for a new client.
  int a = ConnectTo(h.socket());
  int b = ConnectTo(h.socket());
  REQUIRE(write(a, "{\"cmd\"", 6) == 6);
  REQUIRE(write(b, "{\"cmd\"", 6) == 6);
  bool refused = WaitFor(
      [&] {
        auto r = SendControlLine(h.socket(), R"({"cmd": "status"})");
        return r.ok() && r->find("control.max_clients") != std::string::npos;
      },
      std::chrono::seconds(20));
  CHECK(refused);
  close(a);
  close(b);
  CHECK(WaitFor([&] {
    auto r = SendControlLine(h.socket(), R"({"cmd": "status"})");
    return r.ok() && r->find("\"ok\":true") != std::string::npos;
  }));
}

TEST_CASE("agent control: idle clients at control.max_clients make room, oldest first") {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.control_client_timeout_ms = 60000;  // no deadline here: room is made at the limit alone
  DaemonHarness h;
  REQUIRE(h.Start(cfg, {}).ok());
  REQUIRE(cfg.control_max_clients == 16);
  // The report of issue 14: 20 idle connections locked every real client out.
  std::vector<int> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(ConnectTo(h.socket()));
  for (int i = 0; i < 3; ++i) {
    auto r = SendControlLine(h.socket(), R"({"cmd": "status"})");
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(r->find("\"ok\":true") != std::string::npos);
  }
  // The oldest idle ones were closed; the newest are still open.
  CHECK(ClosedByServer(idle.front(), 5000));
  CHECK(!ClosedByServer(idle.back(), 200));
  for (int fd : idle) close(fd);
}

TEST_CASE("agent control: a client silent past control.client_timeout_ms is closed") {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.control_client_timeout_ms = 300;
  DaemonHarness h;
  REQUIRE(h.Start(cfg, {}).ok());
  int silent = ConnectTo(h.socket());
  int partial = ConnectTo(h.socket());
  REQUIRE(write(partial, "{\"cmd\": \"sta", 12) == 12);  // and never the rest
  CHECK(ClosedByServer(silent, 20000));
  CHECK(ClosedByServer(partial, 20000));
  close(silent);
  close(partial);
  // A client that keeps to the deadline is served, request after request.
  int fd = ConnectTo(h.socket());
  for (int i = 0; i < 2; ++i) {
    const std::string req = "{\"cmd\": \"status\"}\n";
    REQUIRE(write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size()));
    std::string got;
    char c = 0;
    while (read(fd, &c, 1) == 1 && c != '\n') got += c;
    CHECK(got.find("\"ok\":true") != std::string::npos);
  }
  close(fd);
}

TEST_CASE("agent control: a client that is neither root nor in control.group is refused") {
  if (geteuid() != 0) {
    MESSAGE("skipped: needs root to connect as another user (CI runs as root)");
    return;
  }
  TempDir dir;
  chmod(dir.path().c_str(), 0755);
  DaemonHarness h;
  REQUIRE(h.Start(DaemonHarness::TestConfig(dir), {}).ok());
  // Open the file mode so that only the credential check stands between nobody and the daemon.
  chmod(h.socket().c_str(), 0666);
  std::string refused = RequestAsNobody(h.socket());
  CHECK(refused.find("\"ok\":false") != std::string::npos);
  CHECK(refused.find("uid 65534") != std::string::npos);
  CHECK(refused.find("may not use the control socket") != std::string::npos);
  h.Stop();

  TempDir dir2;
  chmod(dir2.path().c_str(), 0755);
  DaemonConfig cfg = DaemonHarness::TestConfig(dir2);
  cfg.control_group = "65534";
  DaemonHarness allowed;
  REQUIRE(allowed.Start(cfg, {}).ok());
  chmod(allowed.socket().c_str(), 0666);
  std::string ok = RequestAsNobody(allowed.socket());
  CHECK(ok.find("\"ok\":true") != std::string::npos);
}
