// Which GPUs a process uses (issue 20 item 2). A device collector of a process reads that
// process's own GPUs, named by a stable id, never "every GPU of the node".
//
// NVIDIA: nvmlDeviceGetComputeRunningProcesses_v3 on every device NVML lists. The driver is not
// pid-namespace aware, so the pids are host pids (what the probes and /proc of the host see),
// also for a process inside a container. A GPU is named by its UUID (else its PCI bus id),
// never by the CUDA ordinal, the NVML index or the minor number: those differ as soon as
// CUDA_VISIBLE_DEVICES reorders or subsets the GPUs (Slurm may fill it with UUIDs).
// Under MIG a process's entry carries its GPU and compute instance ids.
//
// AMD: <sys>/class/kfd/kfd/proc/<pid>/vram_<gpu_id> names every GPU the process has a KFD
// context on (its VRAM in bytes), and the KFD topology maps gpu_id to its node's properties:
// drm_render_minor, and the PCI address from `domain` and `location_id` (bus << 8 | devfn).
// KFD names processes by their host pid too (the lead thread's pid).
//
// A process with no GPU yet (before its first CUDA/HIP call) gets an empty list: the caller
// checks again later instead of measuring every GPU (GpuRecheck).
//
// Threads: plain functions; the NVML library is used from the caller's thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectors/nvml/nvml_library.h"
#include "common/status.h"

namespace seqpoint::collectors {

inline constexpr uint32_t kNoMigInstance = 0xFFFFFFFFu;

struct ProcessGpu {
  std::string vendor;         // "nvidia" or "amd"
  std::string uuid;           // NVIDIA "GPU-..."; AMD "GPU-<unique_id hex>" when KFD reports one
  std::string pci;            // "0000:01:00.0"
  std::string name;           // product name, or KFD node name ("gfx90a"), "" when unknown
  unsigned nvml_index = 0;    // NVIDIA: NVML's index (to reach the device; never a label)
  uint32_t kfd_gpu_id = 0;    // AMD: KFD's gpu_id
  uint32_t render_minor = 0;  // AMD: /dev/dri/renderD<minor>
  uint32_t gpu_instance = kNoMigInstance;      // NVIDIA MIG GPU instance
  uint32_t compute_instance = kNoMigInstance;  // NVIDIA MIG compute instance
  std::optional<uint64_t> used_bytes;          // the process's memory on it, when known

  bool mig() const { return gpu_instance != kNoMigInstance; }
  // The stable label of the GPU's series: UUID, else PCI bus id; a MIG instance adds
  // "/gi<G>/ci<C>" (one process sees one instance; bounded by the node's MIG layout).
  std::string id() const;
};

// The NVIDIA GPUs on which `host_pid` holds a compute context. A GPU NVML cannot answer for
// (NVML_ERROR_GPU_IS_LOST) is skipped and named in *warnings; if every GPU fails, the error.
Result<std::vector<ProcessGpu>> NvidiaGpusOf(const NvmlLibrary& nvml, pid_t host_pid,
                                             std::string* warnings = nullptr);

// The AMD GPUs on which `host_pid` has a KFD context, from `sys_root` (normally "/sys").
// NotFound when this node has no KFD (no AMD GPU driver); an empty list when the process has
// none (yet).
Result<std::vector<ProcessGpu>> AmdGpusOf(const std::string& sys_root, pid_t host_pid);

// CUDA_VISIBLE_DEVICES of a process as it set it: each entry a UUID ("GPU-...", "MIG-..."), an
// ordinal, or empty (unset). Only to explain a mapping in messages: the mapping itself never
// depends on it.
std::vector<std::string> ParseVisibleDevices(const std::string& value);

// When to look again for the GPUs of a process that had none: at most once per `interval_ns`.
class GpuRecheck {
 public:
  explicit GpuRecheck(int64_t interval_ns = 1'000'000'000) : interval_ns_(interval_ns) {}
  // True when a lookup is due at monotonic time `now_ns` (the first call always is).
  bool Due(int64_t now_ns);

 private:
  int64_t interval_ns_;
  std::optional<int64_t> last_ns_;
};

}  // namespace seqpoint::collectors
