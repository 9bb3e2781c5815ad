#include "agent/control/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace seqpoint::daemon {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Status WaitFor(int fd, short events, int timeout_ms, const std::string& path) {
  pollfd p{fd, events, 0};
  int rc = poll(&p, 1, timeout_ms);
  if (rc == 0) return Unavailable("seqpointd on '" + path + "' did not answer in time");
  if (rc < 0) return IoError(std::string("poll: ") + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

std::string ResolveControlSocket(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("SEQPOINT_CONTROL_SOCKET");
  return env && *env ? env : kDefaultControlSocket;
}

Result<std::string> SendControlLine(const std::string& path, const std::string& line,
                                    int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return InvalidArgument("control socket path '" + path + "' is too long for a Unix socket");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return IoError(std::string("socket: ") + std::strerror(errno));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    if (e == EACCES || e == EPERM) {
      return PermissionDenied("not allowed to open '" + path +
                              "' (run as root or as a member of seqpointd's control.group)");
    }
    return Unavailable("cannot reach seqpointd on '" + path + "': " + std::strerror(e) +
                       " (is it running? `systemctl status seqpointd`; or pass --socket PATH)");
  }
  std::string out = line + "\n";
  for (size_t sent = 0; sent < out.size();) {
    SEQPOINT_RETURN_IF_ERROR(WaitFor(fd.get(), POLLOUT, timeout_ms, path));
    ssize_t n = send(fd.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;  // the daemon may have refused us and closed: read its answer below
    }
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buf[65536];
  while (response.find('\n') == std::string::npos) {
    SEQPOINT_RETURN_IF_ERROR(WaitFor(fd.get(), POLLIN, timeout_ms, path));
    ssize_t n = recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  if (response.empty()) return Unavailable("seqpointd on '" + path + "' closed without answering");
  return response.substr(0, response.find('\n'));
}

Result<nlohmann::json> SendControlRequest(const std::string& path, const ControlRequest& request,
                                          int timeout_ms) {
  auto line = SendControlLine(path, ControlRequestToJson(request).dump(), timeout_ms);
  if (!line.ok()) return line.status();
  return ParseResponseLine(*line);
}

}  // namespace seqpoint::daemon
