// GpuSyncWatch: the eBPF source's CUDA/HIP sync probes (probes/sync/sync_probes.h), beside its
// iteration probes: attached to the same processes once they map libcudart, libcuda or
// libamdhip64 (at discovery, at each library load, and when a mark is asked of a process not
// attached yet), detached when they exit. It answers IterationSource::GpuSyncMark: the
// process's latest sync return, or why there is none (the probes could not load here; the
// process maps no GPU runtime yet; the attach failed), which the measurement side turns into a
// GPU window flagged "window not closed by a sync" (collectors/gpu/sync_window.h).
//
// Threads: the daemon's io_context thread (the source's).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "collectors/gpu/sync_window.h"
#include "common/status.h"

namespace seqpoint::probes {
class SyncProbes;
}

namespace seqpoint::daemon {

class GpuSyncWatch {
 public:
  // Loads the probes; when they cannot load, the watch stays usable and says why on every
  // Mark (no eBPF for them, no CAP_BPF, ...).
  explicit GpuSyncWatch(std::string proc_root = "/proc");
  ~GpuSyncWatch();
  GpuSyncWatch(const GpuSyncWatch&) = delete;
  GpuSyncWatch& operator=(const GpuSyncWatch&) = delete;

  bool loaded() const { return probes_ != nullptr; }
  const std::string& why_not_loaded() const { return why_; }
  // Attaches to the sync functions the process maps now (again: adds what it mapped since).
  // A process with no GPU runtime is no fault: NotFound, remembered as the reason.
  Status Attach(int pid);
  void Detach(int pid);
  // The latest sync return of `pid` (attaching first when it is not attached yet), or why none.
  Result<collectors::SyncReading> Mark(int pid);
  // "function (library)" of each sync function attached for `pid`, for `seqpoint status`.
  std::string Describe(int pid) const;

 private:
  std::unique_ptr<probes::SyncProbes> probes_;
  std::string why_;
  std::map<int, std::string> attached_;  // pid -> the functions attached, as one line
  std::map<int, std::string> refused_;   // pid -> why the last attach found nothing
};

}  // namespace seqpoint::daemon
