// Where the iteration probes' kernel objects live in bpffs while no daemon holds them, so that
// probes stay attached and counting across a daemon restart (a crash, `systemctl restart`, a
// package upgrade) and the next daemon adopts them instead of attaching again.
//
// Layout, one tree per daemon state (two daemons with separate state dirs never share):
//
//   <root>/<instance>/<generation>/map_<name>            the shared maps (ring buffer, open
//                                                        iterations, registered pids, hooks,
//                                                        counters, .bss)
//   <root>/<instance>/<generation>/pid_<pid>_<start>/<key>@<i>   the kernel links of one
//                                                        attached process: bpf_link pins
//
// Names hold no '.': bpffs refuses them (reserved for its own files). <instance> is the daemon's
// state directory with '/', '.' and '%' escaped; <generation> is a hash
// of the BPF object and of everything fixed at load (ring size, rodata): a daemon may reuse the
// maps only of its own generation. <start> is the process's start time (/proc/PID/stat field
// 22), which tells a reused pid. Removing a link's pin detaches it once no fd holds it;
// removing a map's pin frees it once no program or fd holds it. bpffs is in memory: a reboot
// clears everything.
//
// Threads: none of its own; one owner thread.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace seqpoint::probes {

// Makes sure `root`'s parent is on a bpffs: OK when it is; mounts one when the parent is
// /sys/fs/bpf and nothing is mounted there (root needed); an error naming the fix otherwise.
Status EnsureBpffs(const std::string& root);

// A bpffs name for `text` ('%' -> "%25", '/' -> "%2f", '.' -> "%2e"), and back.
std::string EscapePinName(const std::string& text);
std::string UnescapePinName(const std::string& name);

// A 64-bit FNV-1a hash, for generation names.
uint64_t PinHash(const void* data, size_t size, uint64_t seed = 14695981039346656037ull);

struct PinnedLink {
  std::string key;   // the attachment's key (IterationProbes' Attachment::links)
  std::string path;  // the pin
};

struct PinnedPid {
  int pid = 0;
  uint64_t start_time = 0;
  std::string dir;
  std::vector<PinnedLink> links;
};

class ProbePins {
 public:
  // The tree of state directory `instance` under `root`, generation `generation` (created).
  static Result<ProbePins> Open(const std::string& root, const std::string& instance,
                                uint64_t generation);

  const std::string& dir() const { return dir_; }
  std::string MapPath(const std::string& name) const { return dir_ + "/map_" + name; }
  // Generations of this instance other than ours (an older BPF object or other ring size).
  std::vector<std::string> OtherGenerations() const;

  // The processes whose links are pinned in generation directory `dir` (default: ours).
  std::vector<PinnedPid> ListPids(const std::string& dir = "") const;
  // Pins the kernel link fds `fds` of process `pid` under `key`; an fd already pinned is not
  // pinned twice.
  Status PinLinks(int pid, uint64_t start_time, const std::string& key, const std::set<int>& fds);
  // Unpins every link of `pid`: they detach once the caller closes its fds.
  void RemovePid(int pid, uint64_t start_time);

 private:
  std::string PidDir(int pid, uint64_t start_time) const;
  std::string instance_dir_;
  std::string dir_;
};

// Removes a pin tree (a generation, an instance, or the whole root): every pin, then the
// directories. Returns how many pins it removed; a missing `dir` is 0.
Result<int> RemovePinTree(const std::string& dir);

// The directory holding the pins of the daemon whose state directory is `state_dir`.
std::string InstancePinDir(const std::string& root, const std::string& state_dir);

// An instance tree under `root` whose daemon can never come back for it, removed by
// SweepOrphanInstances: its state directory no longer exists (a SIGKILLed demo's or test's
// temporary one), or holds no `state_db_name` (not a seqpointd's).
struct SweptInstance {
  std::string state_dir;  // as the tree's name says
  std::string why;
  int pins = 0;  // pins removed (each detaches its link or frees its map)
};
// Removes the orphaned instance trees under `root`, never `self_state_dir`'s. Trees whose name is
// a hash (a state directory path too long to spell) cannot be traced back and are kept.
std::vector<SweptInstance> SweepOrphanInstances(const std::string& root,
                                                const std::string& self_state_dir,
                                                const std::string& state_db_name = "state.db");

// The file descriptors of this process that are bpf links, from /proc/self/fd. Diffed around an
// attach they are the kernel links it made: a libbpf USDT attach makes one uprobe link per call
// site, owned by a libbpf object that cannot itself be pinned.
std::set<int> OpenLinkFds();

}  // namespace seqpoint::probes
