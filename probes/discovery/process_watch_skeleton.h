// RAII owner of the process_watch BPF skeleton (exec/exit tracepoints, ld.so uprobes): open ->
// load -> attach. Links it creates live as long as it does. Not thread-safe; one owner thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "probes/discovery/process_watch.h"
#include "probes/libbpf_util.h"

struct process_watch_bpf;

namespace seqpoint::probes {

class ProcessWatchSkeleton {
 public:
  static Result<std::unique_ptr<ProcessWatchSkeleton>> Load(const std::string& btf_path);
  ~ProcessWatchSkeleton();
  ProcessWatchSkeleton(const ProcessWatchSkeleton&) = delete;
  ProcessWatchSkeleton& operator=(const ProcessWatchSkeleton&) = delete;

  // sched_process_exec and sched_process_exit (BTF tracepoints: no tracefs needed).
  Status AttachTracepoints();
  // A uprobe on _dl_debug_state in `linker` (a path the agent can open), for every process.
  Status AttachLinker(const std::string& linker);

  // Exit events are reported for watched pids only.
  Status Watch(int pid);
  void Unwatch(int pid);

  // The kernel's records of watched processes' exits (sp_proc_exit, process_watch.h), kept
  // where a full ring cannot drop them. RecordedExits lists those not taken yet (pid, record);
  // TakeExit removes one (false when there was none).
  std::vector<std::pair<int, sp_proc_exit>> RecordedExits() const;
  bool TakeExit(int pid);

  int events_fd() const;
  // enum sp_proc_stat, summed over CPUs.
  std::array<uint64_t, SP_PROC_STAT_COUNT> ReadStats() const;

 private:
  explicit ProcessWatchSkeleton(process_watch_bpf* skel) : skel_(skel) {}
  process_watch_bpf* skel_;
  std::vector<LinkPtr> links_;
};

}  // namespace seqpoint::probes
