// The control socket: protocol errors, size limits, client limits and peer credentials.
#include <doctest/doctest.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST_CASE("agent control: clients beyond control.max_clients are refused") {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.control_max_clients = 2;
  DaemonHarness h;
  REQUIRE(h.Start(cfg, {}).ok());
  auto open_idle = [&] {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", h.socket().c_str());
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    return fd;
  };
  int a = open_idle();
  int b = open_idle();
  // Both idle slots are taken once the daemon has accepted them.
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
