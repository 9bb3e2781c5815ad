#include "agent/daemon/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace seqpoint::daemon {
namespace {

// A decimal environment variable; nullopt-like -1 when absent or not a number.
int64_t EnvNumber(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return -1;
  int64_t out = -1;
  std::string_view s(v);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() ? out : -1;
}

}  // namespace

SystemdNotifier SystemdNotifier::FromEnvironment() {
  SystemdNotifier n;
  const char* path = std::getenv("NOTIFY_SOCKET");
  // Only a path or an abstract name: sd_notify(3) also knows vsock addresses, which no
  // systemd on the nodes seqpointd targets hands to a service.
  if (path != nullptr && (path[0] == '/' || path[0] == '@') &&
      std::strlen(path) < sizeof(sockaddr_un::sun_path)) {
    n.socket_path_ = path;
  }
  const int64_t usec = EnvNumber("WATCHDOG_USEC");
  const int64_t pid = EnvNumber("WATCHDOG_PID");
  if (n.enabled() && usec > 0 && (pid < 0 || pid == getpid())) {
    // Half the timeout, as sd_watchdog_enabled(3) advises: one late keep-alive is not a restart.
    n.keepalive_ = std::chrono::milliseconds(std::max<int64_t>(usec / 2000, 1));
  }
  return n;
}

Status SystemdNotifier::Notify(std::string_view message) const {
  if (!enabled()) return Status::Ok();
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return IoError(std::string("sd_notify: socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path_.size());
  if (socket_path_[0] == '@') {
    addr.sun_path[0] = '\0';  // abstract: the name's length, no terminating NUL
  } else {
    len += 1;
  }
  ssize_t n = sendto(fd, message.data(), message.size(), MSG_NOSIGNAL,
                     reinterpret_cast<const sockaddr*>(&addr), len);
  int err = errno;
  close(fd);
  if (n < 0) {
    return IoError("sd_notify to NOTIFY_SOCKET '" + socket_path_ + "': " + std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace seqpoint::daemon
