// CollectiveProbes: when each rank of a data-parallel job arrives at its collectives, through
// zero-code uprobes at the entry of the collective functions its process already calls (no
// change to the training code). The slow rank of a synchronous step arrives last and waits
// least, so arrivals name stragglers where step times cannot (every rank's step is as long as
// the slowest's). agent/fleet/straggler.h turns arrivals into per-step verdicts.
//
//   auto probes = CollectiveProbes::Create({});
//   probes->AttachPid(pid);                          // every known collective the process maps
//   probes->Poll(100, [](const CollectiveArrival& a) { ... });
//
// Functions (CollectiveFunctions(), the same file-name-prefix matching as the zero-code probes,
// LibraryMatches): gloo on CPU through libtorch's c10d::ProcessGroupGloo (allreduce,
// allreduce_coalesced, reduce_scatter, allgather, _allgather_base: the calls DDP's reducer and
// FSDP make on the rank's own thread; gloo's own gloo::allreduce runs later on a worker thread,
// so it times the queue, not the rank); NCCL (libnccl.so) and RCCL (librccl.so): ncclAllReduce,
// ncclReduceScatter, ncclAllGather, ncclGroupEnd. On a GPU these are the host's arrival, when it
// enqueues the collective: a rank whose GPU is slow arrives late there once its host waits for
// the GPU (a synchronisation in the step, or the launch queue full), not before.
//
// Cost: one uprobe hit (~3 us here) and one 32-byte ring record per collective call; DDP makes
// one call per gradient bucket per step. Threads: one owner thread; the BPF side runs in the
// traced threads. Destruction detaches everything (links are file-descriptor based).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "probes/libbpf_util.h"
#include "probes/link_reaper.h"
#include "probes/ring_reader.h"

struct collective_probe_bpf;

namespace seqpoint::probes {

struct CollectiveFunction {
  std::string name;     // "gloo", "nccl", "rccl": the family, for messages and metrics
  std::string library;  // file-name prefix or absolute path (LibraryMatches)
  std::string symbol;   // C++: mangled
};

// The shipped table, in a stable order (the index is the event's `function`).
const std::vector<CollectiveFunction>& CollectiveFunctions();

struct CollectiveArrival {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;     // CLOCK_MONOTONIC, as IterationEvent::begin_ns
  uint32_t function = 0;  // index into CollectiveProbesOptions::functions
};

// One function found in a process: where to attach.
struct CollectiveTarget {
  uint32_t function = 0;  // index into the options' table
  std::string mapped_path;
  std::string open_path;
};

// The collective functions `pid` maps now (possibly none). NotFound when the process is gone.
Result<std::vector<CollectiveTarget>> FindCollectiveTargets(
    const std::string& proc_root, int pid, const std::vector<CollectiveFunction>& functions);

struct CollectiveProbesOptions {
  std::string proc_root = "/proc";
  uint32_t ring_buffer_bytes = 1u << 20;  // power of two (rounded up): 32768 records
  uint64_t wakeup_bytes = 64u << 10;      // backlog that forces a consumer wakeup
  std::vector<CollectiveFunction> functions = CollectiveFunctions();
};

struct CollectiveProbeStats {
  uint64_t hits = 0, lost = 0, wakeups = 0;  // BPF side, summed over CPUs
  uint64_t received = 0;                     // records consumed
};

class CollectiveProbes {
 public:
  // Loads the program. Errors: PermissionDenied (not root), Unsupported (no BPF ring buffer or
  // BPF cookies: Linux 5.15+).
  static Result<std::unique_ptr<CollectiveProbes>> Create(const CollectiveProbesOptions& options);
  ~CollectiveProbes();
  CollectiveProbes(const CollectiveProbes&) = delete;
  CollectiveProbes& operator=(const CollectiveProbes&) = delete;

  // Attaches to every collective function `pid` maps and has no probe on yet; call again after
  // it loads a library (idempotent). Returns the number of new attachments; NotFound names the
  // process when it maps none (not a fault: a process that never communicates).
  Result<int> AttachPid(int pid);
  // Returns at once: the links are closed on a worker thread (link_reaper.h, ~100 ms a uprobe);
  // arrivals a live process makes meanwhile are dropped, and AttachPid of it waits for them.
  void DetachPid(int pid);
  bool IsAttached(int pid) const { return links_.count(pid) > 0; }
  // "gloo:_ZN4c10d16ProcessGroupGloo9allreduce... in /usr/lib/.../libtorch_cpu.so.1.13.0", ...
  std::vector<std::string> Attached(int pid) const;

  // Waits up to timeout_ms for a wakeup, then hands every queued arrival to `sink` (in ring
  // order: per thread in time order). Returns the number delivered.
  Result<int> Poll(int timeout_ms, const std::function<void(const CollectiveArrival&)>& sink);
  CollectiveProbeStats stats() const;
  const std::vector<CollectiveFunction>& functions() const { return options_.functions; }

 private:
  CollectiveProbes() = default;
  CollectiveProbesOptions options_;
  collective_probe_bpf* skel_ = nullptr;
  std::unique_ptr<RingReader> ring_;
  struct Link {
    std::string key;  // function index + open path
    LinkPtr link;
  };
  std::map<int, std::vector<Link>> links_;  // declared after skel_: destroyed first
  std::unique_ptr<LinkReaper> reaper_ = std::make_unique<LinkReaper>();  // detached links
  uint64_t received_ = 0;
};

}  // namespace seqpoint::probes
