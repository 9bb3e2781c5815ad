#include "agent/control/peer_policy.h"

#include <grp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace seqpoint::daemon {

Result<PeerCredentials> ReadPeerCredentials(int fd) {
  struct ucred cred {};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return IoError(std::string("SO_PEERCRED on the control socket: ") + std::strerror(errno));
  }
  PeerCredentials peer{cred.pid, cred.uid, cred.gid, {}};
  gid_t groups[256];
  socklen_t glen = sizeof groups;
  // SO_PEERGROUPS (net/core/sock.c): ERANGE when the buffer is short; the peer then is judged by
  // its primary group only, which can only refuse more, never allow more.
  if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0) {
    peer.groups.assign(groups, groups + glen / sizeof(gid_t));
  }
  return peer;
}

Result<PeerPolicy> PeerPolicy::Create(const std::string& group) {
  PeerPolicy p;
  p.self_uid_ = geteuid();
  p.group_name_ = group;
  if (group.empty()) return p;
  gid_t gid = 0;
  auto [ptr, ec] = std::from_chars(group.data(), group.data() + group.size(), gid);
  if (ec == std::errc() && ptr == group.data() + group.size()) {
    p.group_ = gid;
    return p;
  }
  struct group grp {};
  struct group* found = nullptr;
  std::vector<char> buf(16384);
  if (getgrnam_r(group.c_str(), &grp, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return InvalidArgument("control.group '" + group +
                           "' is not a known group (create it with groupadd, or leave it empty)");
  }
  p.group_ = found->gr_gid;
  return p;
}

Status PeerPolicy::Check(const PeerCredentials& peer) const {
  if (peer.uid == 0 || peer.uid == self_uid_) return Status::Ok();
  if (group_) {
    if (peer.gid == *group_) return Status::Ok();
    for (gid_t g : peer.groups) {
      if (g == *group_) return Status::Ok();
    }
  }
  std::string allowed = group_ ? "root or members of group '" + group_name_ + "'" : "root only";
  return PermissionDenied("uid " + std::to_string(peer.uid) + " (pid " + std::to_string(peer.pid) +
                          ") may not use the control socket: allowed are " + allowed +
                          " (set control.group in seqpointd.toml)");
}

}  // namespace seqpoint::daemon
