// SyncProbes: when a process last returned from a CUDA synchronisation, seen by uretprobes on
// the sync functions of the CUDA libraries it maps (sync_probe.bpf.c). The agent closes a
// measured window's GPU readings at the first such return after the window's CPU end
// (collectors/gpu/sync_window.h): CUDA launches are asynchronous, and only a sync says the GPU
// has finished the work the CPU queued.
//
//   auto syncs = SyncProbes::Create();
//   syncs->AttachPid(pid);           // every sync function its mapped CUDA libraries define
//   SyncMark m = *syncs->Mark(pid);  // latest return (CLOCK_MONOTONIC ns) and count so far
//
// The functions (CudaSyncFunctions()): libcudart's cudaStreamSynchronize (PyTorch's .item()
// and every blocking device-to-host copy end in it: c10::cuda::memcpy_and_sync),
// cudaDeviceSynchronize, cudaEventSynchronize and cudaMemcpy with kind cudaMemcpyDeviceToHost;
// libcuda's cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize, cuMemcpyDtoH_v2 (a
// statically linked runtime still goes through libcuda); HIP's hipStreamSynchronize,
// hipDeviceSynchronize, hipEventSynchronize and device-to-host hipMemcpy. Libraries are matched as
// the zero-code probes match theirs (LibraryMatches, zero_code_probe.h), symbols by
// HasFunctionSymbol, files opened as the process maps them (containers included, proc_reader.h).
//
// Threads: one owner thread. The BPF side runs in the traced threads. Links are fd-based:
// destruction (or a killed agent) detaches everything.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "probes/libbpf_util.h"

struct sync_probe_bpf;

namespace seqpoint::probes {

struct SyncFunction {
  std::string library;    // file-name prefix, as ZeroCodeProbe::library ("libcudart.so")
  std::string function;   // exported symbol
  bool d2h_only = false;  // a copy whose 4th argument is the direction: only device-to-host
};

// The CUDA runtime's and driver's synchronising calls, in a stable order (the mark's index).
const std::vector<SyncFunction>& CudaSyncFunctions();

struct SyncMark {
  int64_t last_ns = 0;   // CLOCK_MONOTONIC of the latest sync return; 0 before the first
  uint64_t count = 0;    // sync returns since AttachPid
  std::string function;  // the latest one's name ("" before the first)
};

class SyncProbes {
 public:
  // Loads the BPF program (root, or CAP_BPF + CAP_PERFMON). `functions` defaults to
  // CudaSyncFunctions().
  static Result<std::unique_ptr<SyncProbes>> Create(std::string proc_root = "/proc",
                                                    std::vector<SyncFunction> functions = {});
  ~SyncProbes();
  SyncProbes(const SyncProbes&) = delete;
  SyncProbes& operator=(const SyncProbes&) = delete;

  // Attaches to every configured sync function the process's mapped libraries define; returns
  // them as "function (mapped path)". NotFound, naming what was looked for, when it maps none
  // yet (a process before its first CUDA call: attach again once it has loaded the runtime).
  // Again on an attached process: adds what it has mapped since. A failed attach detaches the
  // process and says which function and file.
  Result<std::vector<std::string>> AttachPid(int pid);
  void DetachPid(int pid);
  bool Attached(int pid) const { return pids_.count(pid) > 0; }

  // The process's latest sync return; NotFound when it is not attached.
  Result<SyncMark> Mark(int pid) const;

 private:
  SyncProbes(sync_probe_bpf* skel, std::string proc_root, std::vector<SyncFunction> functions)
      : skel_(skel), proc_root_(std::move(proc_root)), functions_(std::move(functions)) {}
  struct Pid {
    std::map<std::string, LinkPtr> links;  // "function@open_path" -> its uprobe(s)
    std::vector<LinkPtr> entry_links;      // the direction checks of d2h_only copies
  };

  sync_probe_bpf* skel_;
  std::string proc_root_;
  std::vector<SyncFunction> functions_;
  std::map<int, Pid> pids_;
};

}  // namespace seqpoint::probes
