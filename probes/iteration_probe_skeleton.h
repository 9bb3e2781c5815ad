// RAII owner of the iteration_probe BPF skeleton: open -> configure (rodata, ring size,
// zero-code table) -> load; then attach, one link per (process, binary, probe), each owned by
// the caller. Feature choices are made by runtime probes of the kernel, never by its version:
// without BPF cookies (Linux < 5.15) the zero-code programs are not loaded and zero-code attach
// says so; USDT still works (libbpf then maps probe addresses itself).
//
// Threads: not thread-safe; one owner thread. Links must be destroyed before the skeleton
// (IterationProbes declares them after it).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "probes/iteration_probe.h"
#include "probes/libbpf_util.h"
#include "common/status.h"

struct iteration_probe_bpf;

namespace seqpoint::probes {

struct IterationProbeSkeletonConfig {
  uint32_t ring_buffer_bytes = 8u << 20;       // rounded up to a power of two, >= one page
  uint64_t wakeup_bytes = 256u << 10;          // pending bytes that force a consumer wakeup
  uint32_t max_seq_len = 1u << 20;             // larger SLs are flagged SP_FLAG_SL_HUGE
  std::string btf_path;                        // kernel BTF when /sys/kernel/btf/vmlinux is absent
  std::vector<sp_zero_code_config> zero_code;  // index = zero-code probe index
  bool counters = true;                        // load the counter path (probe_counters.h)
  // Non-empty: the generation directory of probe_pins.h. The maps a restarted daemon must share
  // with the programs a previous one left attached are pinned there, or reused when they are.
  std::string pin_dir;
};

class IterationProbeSkeleton {
 public:
  static Result<std::unique_ptr<IterationProbeSkeleton>> Load(
      const IterationProbeSkeletonConfig& config);
  // The generation of the maps `config` would pin: a hash of the BPF object and of what is
  // fixed at load (ring size, rodata). Maps are reused only within one generation.
  static uint64_t Generation(const IterationProbeSkeletonConfig& config);
  ~IterationProbeSkeleton();
  IterationProbeSkeleton(const IterationProbeSkeleton&) = delete;
  IterationProbeSkeleton& operator=(const IterationProbeSkeleton&) = delete;

  // USDT seqpoint:iteration_begin (begin = true) or iteration_end in `binary` (a path the agent
  // can open, e.g. /proc/PID/root/...) for process `pid`.
  Result<LinkPtr> AttachUsdt(int pid, const std::string& binary, bool begin);
  // Uprobe at the entry of `function` in `binary` for `pid`: the SL, boundary or gate function
  // of zero-code probe `probe`.
  enum class ZeroCodeRole { kSl, kBoundary, kGate };
  Result<LinkPtr> AttachZeroCode(int pid, const std::string& binary, const std::string& function,
                                 uint32_t probe, ZeroCodeRole role);

  // Rewrites entry `index` of the zero-code probe table (a config reload). The caller makes
  // sure no attached uprobe carries that index in its cookie.
  Status SetZeroCodeConfig(uint32_t index, const sp_zero_code_config& config);

  // enum sp_hook_mode, written straight into the programs' mmapped .bss (no syscall).
  void SetHookMode(uint32_t mode);

  bool zero_code_supported() const { return zero_code_supported_; }
  // Whether the probes read perf counters (probe_counters.h); why not, when they do not.
  bool counters_supported() const { return counters_why_not_.empty(); }
  const std::string& counters_why_not() const { return counters_why_not_; }
  // Where the counter path reads hypervisor steal time (probe_counters.bpf.h), chosen at load:
  // "kvm_steal_time" (KVM's per-CPU record, checked against the run queue's copy at every read,
  // which a failing read falls back to: SP_STAT_COUNTER_STEAL_STALE), "run_queue" (the run
  // queue's copy only, up to a tick old), "none" (steal not subtracted), or "" when the counter
  // path is off. steal_source_why() says why, in a sentence.
  const std::string& steal_source() const { return steal_source_; }
  const std::string& steal_source_why() const { return steal_source_why_; }
  // sp_sched_switch, which banks counted threads as they switch (counters only), and
  // sp_cnt_exec, which follows a thread that calls exec to its new tid.
  Result<LinkPtr> AttachSchedSwitch();
  Result<LinkPtr> AttachCountersExec();
  // Gives every thread of `pid` (registered in counter_procs) a record in counter_threads, as if
  // it switched in now when it is on a CPU (sp_cnt_seed).
  Status SeedCounterThreads(int pid);
  uint32_t ring_buffer_bytes() const { return ring_buffer_bytes_; }

  int events_fd() const;
  int inflight_fd() const;
  int thread_open_fd() const;
  int pids_fd() const;
  int wanted_iters_fd() const;
  int wanted_sls_fd() const;
  int zero_code_state_fd() const;
  int counter_threads_fd() const;
  int counter_procs_fd() const;
  int counter_begins_fd() const;

  // The global counters (enum sp_stat), summed over CPUs.
  std::array<uint64_t, SP_STAT_COUNT> ReadStats() const;

 private:
  explicit IterationProbeSkeleton(iteration_probe_bpf* skel) : skel_(skel) {}
  iteration_probe_bpf* skel_;
  bool zero_code_supported_ = false;
  std::string counters_why_not_ = "not loaded";
  std::string steal_source_;
  std::string steal_source_why_;
  uint32_t ring_buffer_bytes_ = 0;
};

// IDs of the programs of ours (names sp_*) loaded in the kernel now, whoever loaded them: after
// the agent exits none of its IDs may remain (tests and `seqpoint probe --check` use this).
Result<std::set<uint32_t>> LoadedSeqpointProgramIds();
Result<int> CountLoadedSeqpointPrograms();

}  // namespace seqpoint::probes
