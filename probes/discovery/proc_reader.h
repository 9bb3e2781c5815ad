// Reads what the probes need from procfs, always under an injectable root (default "/proc"), so
// tests run against fixture trees. A path in /proc/PID/maps is not always one the agent can
// open: for a process in another mount namespace (a container) it is relative to the
// container's root, reached as /proc/PID/root/<path>; for a chroot it is the host path; for a
// deleted file only /proc/PID/map_files/<range> still reaches it. ReadExecutableMappings picks,
// per file, the candidate whose inode is the one mapped. Thread-safe (no state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace seqpoint::probes {

struct ProcessIdentity {
  int pid = 0;
  uint64_t start_time = 0;  // /proc/PID/stat field 22 (clock ticks since boot): tells pid reuse
  std::string comm;         // /proc/PID/stat field 2
  char state = '?';         // field 3: 'Z' (zombie) and 'X' (dead) have exited
  bool exited() const { return state == 'Z' || state == 'X'; }
};

// A file a process maps executable, and how the agent reaches that very file.
struct Mapping {
  std::string path;       // as /proc/PID/maps shows it (relative to the reader's root when the
                          // process's root is reachable from it, e.g. a chroot)
  std::string open_path;  // <proc_root>/PID/root<path>, <path> or <proc_root>/PID/map_files/..,
                          // whichever is the mapped inode (see ResolveMapping in the .cpp)
  bool deleted = false;   // replaced or removed on disk since mapped: reachable via map_files
};

// The distinct files `pid` maps executable (its binary, ld.so, shared libraries), in map order.
Result<std::vector<Mapping>> ReadExecutableMappings(const std::string& proc_root, int pid);

// Identity of a live process; NotFound when it is gone.
Result<ProcessIdentity> ReadProcessIdentity(const std::string& proc_root, int pid);

// The numeric entries of proc_root: every process visible there.
Result<std::vector<int>> ListPids(const std::string& proc_root);

// "<proc_root>/<pid>/root<path>": `path` (absolute, as the process sees it) from outside.
std::string PathInRoot(const std::string& proc_root, int pid, const std::string& path);

// The last component of a path.
std::string BaseName(const std::string& path);

}  // namespace seqpoint::probes
