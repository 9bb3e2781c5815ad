// Who may talk to the control socket: root, the daemon's own user, and members of
// control.group. The kernel vouches for the peer (SO_PEERCRED: uid/gid/pid at connect time;
// SO_PEERGROUPS, Linux 4.13+: its supplementary groups), so a client cannot claim an identity.
// The socket file is also created 0660 with control.group as its group, so others are normally
// stopped by the file mode already; this check is the guarantee.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace seqpoint::daemon {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
};

// Reads the peer of a connected Unix socket.
Result<PeerCredentials> ReadPeerCredentials(int fd);

class PeerPolicy {
 public:
  // group: a group name or number; empty allows root and the daemon's user only.
  static Result<PeerPolicy> Create(const std::string& group);
  // OK, or PermissionDenied naming the uid and what would be allowed.
  Status Check(const PeerCredentials& peer) const;
  std::optional<gid_t> group() const { return group_; }

 private:
  std::optional<gid_t> group_;
  std::string group_name_;
  uid_t self_uid_ = 0;
};

}  // namespace seqpoint::daemon
