// See sync_probes.h.
#include "probes/sync/sync_probes.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <utility>

#include "probes/discovery/elf_file.h"
#include "probes/discovery/proc_reader.h"
#include "probes/sync/sync_probe.h"
#include "probes/zero_code_probe.h"
#include "sync_probe_bpf.skel.h"

namespace seqpoint::probes {

const std::vector<SyncFunction>& CudaSyncFunctions() {
  static const std::vector<SyncFunction> kFunctions = {
      {"libcudart.so", "cudaStreamSynchronize"},
      {"libcudart.so", "cudaStreamSynchronize_ptsz"},  // per-thread default stream builds
      {"libcudart.so", "cudaDeviceSynchronize"},
      {"libcudart.so", "cudaEventSynchronize"},
      {"libcudart.so", "cudaMemcpy", /*d2h_only=*/true},
      {"libcuda.so", "cuStreamSynchronize"},
      {"libcuda.so", "cuCtxSynchronize"},
      {"libcuda.so", "cuEventSynchronize"},
      {"libcuda.so", "cuMemcpyDtoH_v2"},
      // HIP (ROCm): the same calls; hipMemcpyDeviceToHost is 2 as in CUDA.
      {"libamdhip64.so", "hipStreamSynchronize"},
      {"libamdhip64.so", "hipDeviceSynchronize"},
      {"libamdhip64.so", "hipEventSynchronize"},
      {"libamdhip64.so", "hipMemcpy", /*d2h_only=*/true},
  };
  return kFunctions;
}

Result<std::unique_ptr<SyncProbes>> SyncProbes::Create(std::string proc_root,
                                                       std::vector<SyncFunction> functions) {
  if (functions.empty()) functions = CudaSyncFunctions();
  if (functions.size() > SP_SYNC_COOKIE_INDEX_MASK) {
    return InvalidArgument("sync probes: at most 65535 sync functions");
  }
  InstallLibbpfLogCapture();
  SEQPOINT_RETURN_IF_ERROR(CheckBpfCapabilities());
  ClearLibbpfLog();
  sync_probe_bpf* skel = sync_probe_bpf__open();
  if (skel == nullptr) return LibbpfError("opening the sync probe BPF object", errno);
  std::unique_ptr<SyncProbes> self(
      new SyncProbes(skel, std::move(proc_root), std::move(functions)));
  if (int err = sync_probe_bpf__load(skel); err != 0) {
    return LibbpfError("loading the sync probe BPF programs", err);
  }
  return self;
}

SyncProbes::~SyncProbes() {
  pids_.clear();  // links first, then the programs they hold
  sync_probe_bpf__destroy(skel_);
}

Result<std::vector<std::string>> SyncProbes::AttachPid(int pid) {
  auto mapped = ReadExecutableMappings(proc_root_, pid);
  if (!mapped.ok()) return mapped.status();
  const bool fresh = pids_.count(pid) == 0;
  Pid& state = pids_[pid];
  if (fresh) {  // seed the mark: the BPF side only updates watched processes
    const uint32_t key = static_cast<uint32_t>(pid);
    sp_sync_mark zero{};
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.sync_marks), &key, &zero, BPF_ANY) != 0) {
      const int err = errno;
      pids_.erase(pid);
      return LibbpfError("watching pid " + std::to_string(pid) + " for CUDA syncs (" +
                             std::to_string(SP_SYNC_MAX_PIDS) + " processes at most)",
                         err);
    }
  }
  std::vector<std::string> attached;
  for (size_t i = 0; i < functions_.size(); ++i) {
    const SyncFunction& fn = functions_[i];
    for (const Mapping& m : *mapped) {
      if (!LibraryMatches(fn.library, m.path)) continue;
      const std::string key = fn.function + "@" + m.open_path;
      if (state.links.count(key)) break;
      auto has = HasFunctionSymbol(m.open_path, fn.function);
      if (!has.ok() || !*has) continue;
      ClearLibbpfLog();
      LIBBPF_OPTS(bpf_uprobe_opts, opts);
      opts.func_name = fn.function.c_str();
      opts.retprobe = true;
      opts.bpf_cookie = i | (fn.d2h_only ? SP_SYNC_COOKIE_D2H_ONLY : 0u);
      if (fn.d2h_only) {
        LIBBPF_OPTS(bpf_uprobe_opts, entry);
        entry.func_name = fn.function.c_str();
        bpf_link* e = bpf_program__attach_uprobe_opts(skel_->progs.sp_sync_copy_entry, pid,
                                                      m.open_path.c_str(), 0, &entry);
        if (e == nullptr) {
          const int err = errno;
          DetachPid(pid);
          return LibbpfError("attaching a uprobe to " + fn.function + " in " + m.path +
                                 " for pid " + std::to_string(pid),
                             err);
        }
        state.entry_links.emplace_back(e);
      }
      bpf_link* link = bpf_program__attach_uprobe_opts(skel_->progs.sp_sync_return, pid,
                                                       m.open_path.c_str(), 0, &opts);
      if (link == nullptr) {
        const int err = errno;
        DetachPid(pid);
        return LibbpfError("attaching a return probe to " + fn.function + " in " + m.path +
                               " for pid " + std::to_string(pid),
                           err);
      }
      state.links.emplace(key, LinkPtr(link));
      attached.push_back(fn.function + " (" + m.path + ")");
      break;  // one file per function: the first mapped library that defines it
    }
  }
  if (state.links.empty()) {
    DetachPid(pid);
    return NotFound("pid " + std::to_string(pid) +
                    " maps no GPU runtime with a sync function (libcudart.so*, libcuda.so*, "
                    "libamdhip64.so*) yet: attach again after it loads the CUDA or HIP runtime");
  }
  return attached;
}

void SyncProbes::DetachPid(int pid) {
  if (pids_.erase(pid) == 0) return;
  const uint32_t key = static_cast<uint32_t>(pid);
  bpf_map_delete_elem(bpf_map__fd(skel_->maps.sync_marks), &key);
}

Result<SyncMark> SyncProbes::Mark(int pid) const {
  if (pids_.count(pid) == 0) {
    return NotFound("pid " + std::to_string(pid) + " is not watched for CUDA syncs");
  }
  const uint32_t key = static_cast<uint32_t>(pid);
  sp_sync_mark raw{};
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.sync_marks), &key, &raw) != 0) {
    return LibbpfError("reading the CUDA sync mark of pid " + std::to_string(pid), errno);
  }
  SyncMark m;
  m.last_ns = static_cast<int64_t>(raw.last_ns);
  m.count = raw.count;
  if (raw.count > 0 && raw.function < functions_.size())
    m.function = functions_[raw.function].function;
  return m;
}

}  // namespace seqpoint::probes
