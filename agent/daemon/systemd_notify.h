// systemd's readiness and watchdog protocol (sd_notify(3)), without libsystemd: each message is
// one datagram of "KEY=VALUE" lines sent to the AF_UNIX socket named by $NOTIFY_SOCKET (a path,
// or "@name" in the abstract namespace). The unit (packaging/seqpointd.service) is Type=notify
// with WatchdogSec=: seqpointd says READY=1 once its event loop runs, and WATCHDOG=1 from a
// timer on that same loop every half of $WATCHDOG_USEC, so a loop that is wedged (not only a
// process that died) stops the keep-alives and systemd restarts the daemon.
//
// Outside systemd (no NOTIFY_SOCKET, as in tests and under other supervisors) every call does
// nothing.
//
// Threads: Notify() may be called from any thread; it only sends a datagram.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/status.h"

namespace seqpoint::daemon {

class SystemdNotifier {
 public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID.
  static SystemdNotifier FromEnvironment();

  bool enabled() const { return !socket_path_.empty(); }
  // How often to send WATCHDOG=1 (half the unit's WatchdogSec=); 0 when no watchdog is asked
  // for, or when WATCHDOG_PID names another process.
  std::chrono::milliseconds keepalive_interval() const { return keepalive_; }
  // Sends one message ("READY=1", "WATCHDOG=1", "STOPPING=1", "STATUS=..."); Ok and nothing
  // sent when not enabled.
  Status Notify(std::string_view message) const;

 private:
  std::string socket_path_;  // as in NOTIFY_SOCKET ('@' for the abstract namespace)
  std::chrono::milliseconds keepalive_{0};
};

}  // namespace seqpoint::daemon
