// See ebpf_source_sync.h.
#include "agent/source/ebpf_source_sync.h"

#include "probes/sync/sync_probes.h"

namespace seqpoint::daemon {

GpuSyncWatch::GpuSyncWatch(std::string proc_root) {
  auto probes = probes::SyncProbes::Create(std::move(proc_root));
  if (probes.ok()) {
    probes_ = std::move(*probes);
  } else {
    why_ = "the CUDA sync probes could not load: " + probes.status().message();
  }
}

GpuSyncWatch::~GpuSyncWatch() = default;

Status GpuSyncWatch::Attach(int pid) {
  if (!probes_) return Unavailable(why_);
  auto fns = probes_->AttachPid(pid);
  if (!fns.ok()) {
    refused_[pid] = fns.status().message();
    if (!probes_->Attached(pid)) attached_.erase(pid);
    return fns.status();
  }
  refused_.erase(pid);
  std::string line;
  for (const std::string& f : *fns) line += (line.empty() ? "" : ", ") + f;
  std::string& had = attached_[pid];
  if (!line.empty()) had += (had.empty() ? "" : ", ") + line;
  return Status::Ok();
}

void GpuSyncWatch::Detach(int pid) {
  attached_.erase(pid);
  refused_.erase(pid);
  if (probes_) probes_->DetachPid(pid);
}

Result<collectors::SyncReading> GpuSyncWatch::Mark(int pid) {
  if (!probes_) return Unavailable(why_);
  if (!probes_->Attached(pid)) {
    // It may have loaded the runtime since it was found (PyTorch loads libcudart at its first
    // CUDA call): one more look. Attached now, its count starts at 0: only syncs from now on
    // close a window.
    Status st = Attach(pid);
    if (!st.ok()) return Unavailable(st.message());
  }
  auto mark = probes_->Mark(pid);
  if (!mark.ok()) return mark.status();
  return collectors::SyncReading{mark->last_ns, mark->count};
}

std::string GpuSyncWatch::Describe(int pid) const {
  if (!probes_) return why_;
  if (auto a = attached_.find(pid); a != attached_.end()) return "CUDA syncs: " + a->second;
  if (auto r = refused_.find(pid); r != refused_.end()) return "no CUDA sync probe: " + r->second;
  return "no CUDA sync probe yet";
}

}  // namespace seqpoint::daemon
