// See iteration_probe_skeleton.h.
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

#include "probes/iteration_probe_skeleton.h"
#include "probes/probe_pins.h"
#include "iteration_probe_bpf.skel.h"

namespace seqpoint::probes {
namespace {

uint32_t RoundRingSize(uint32_t bytes) {
  uint32_t page = static_cast<uint32_t>(sysconf(_SC_PAGESIZE));
  uint32_t size = page;
  while (size < bytes && size < (1u << 30)) size <<= 1;
  return size;
}

// Kernel BTF is what CO-RE relocates against; say plainly when it is missing.
Status CheckBtf(const std::string& btf_path) {
  struct stat st {};
  if (!btf_path.empty()) {
    if (stat(btf_path.c_str(), &st) != 0) {
      return NotFound("kernel BTF file " + btf_path +
                      " does not exist: fix btf_path, or leave "
                      "it empty to use /sys/kernel/btf/vmlinux");
    }
    return Status::Ok();
  }
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) {
    return Unsupported(
        "this kernel exposes no BTF at /sys/kernel/btf/vmlinux (it was built "
        "without CONFIG_DEBUG_INFO_BTF): the eBPF probes need it, or a BTF file "
        "for this kernel given as btf_path (e.g. from BTFHub)");
  }
  return Status::Ok();
}

// The counter path (probe_counters.h) is a raw tracepoint on sched_switch (and on
// sched_process_exec) that reads task fields through CO-RE: a runtime feature probe, libbpf-tools
// style. Empty when the kernel can run it.
std::string CountersWhyNot() {
  if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_RAW_TRACEPOINT, nullptr) <= 0) {
    return "this kernel cannot run raw tracepoint BPF programs (Linux 4.17+)";
  }
  return "";
}

// The maps shared across a restart (probe_pins.h): what the programs a previous daemon left
// attached write (the ring, open iterations, counters) and what the next daemon must steer
// (registered pids, wanted hooks, hook_mode in .bss). The others stay private to each daemon's
// programs, which keep their own: libbpf's USDT argument specs (a fresh daemon numbers specs from
// 0 again), the zero-code table (its slots are each daemon's), .rodata and the counter maps.
// Where KVM's per-CPU steal record (`steal_time`) lies relative to the same CPU's run queue
// (`runqueues`): both are per-CPU variables, at their offsets in the per-CPU area that vmlinux BTF
// gives (its .data..percpu section). 0 when either is missing (no KVM guest support, no BTF): the
// counter path then reads steal from the run queue's copy (probe_counters.bpf.h).
uint64_t StealTimeFromRunQueue() {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (vmlinux == nullptr) return 0;
  int64_t steal = -1, rq = -1;
  const int n = static_cast<int>(btf__type_cnt(vmlinux));
  for (int id = 1; id < n && (steal < 0 || rq < 0); ++id) {
    const btf_type* t = btf__type_by_id(vmlinux, id);
    if (!btf_is_datasec(t)) continue;
    const char* name = btf__name_by_offset(vmlinux, t->name_off);
    if (name == nullptr || std::strcmp(name, ".data..percpu") != 0) continue;
    const btf_var_secinfo* v = btf_var_secinfos(t);
    for (int i = 0; i < btf_vlen(t); ++i, ++v) {
      const char* var = btf__name_by_offset(vmlinux, btf__type_by_id(vmlinux, v->type)->name_off);
      if (var == nullptr) continue;
      if (std::strcmp(var, "steal_time") == 0) steal = v->offset;
      if (std::strcmp(var, "runqueues") == 0) rq = v->offset;
    }
  }
  btf__free(vmlinux);
  return steal < 0 || rq < 0 ? 0 : static_cast<uint64_t>(steal - rq);
}

// Whether struct `type` of vmlinux BTF has a member `member` (what bpf_core_field_exists asks).
bool HasMember(const btf* vmlinux, const char* type, const char* member) {
  const int id = btf__find_by_name_kind(vmlinux, type, BTF_KIND_STRUCT);
  if (id <= 0) return false;
  const btf_type* t = btf__type_by_id(vmlinux, id);
  const btf_member* m = btf_members(t);
  for (int i = 0; i < btf_vlen(t); ++i, ++m) {
    const char* name = btf__name_by_offset(vmlinux, m->name_off);
    if (name != nullptr && std::strcmp(name, member) == 0) return true;
  }
  return false;
}

// The steal source the counter path uses (SP_STEAL_KNOWN and cpu_steal in
// probe_counters.bpf.h): {source, why}.
std::pair<std::string, std::string> StealSource(uint32_t steal_cpus, uint64_t steal_time_off) {
  if (steal_cpus == 0) {
    return {"none",
            "this kernel has no bpf_loop (Linux 5.17+): a thread on a CPU at a probe is counted by "
            "wall time, what a hypervisor stole included"};
  }
  btf* vmlinux = btf__load_vmlinux_btf();
  const bool known = vmlinux != nullptr && HasMember(vmlinux, "rq", "prev_steal_time_rq") &&
                     HasMember(vmlinux, "sched_entity", "cfs_rq") &&
                     HasMember(vmlinux, "cfs_rq", "rq");
  btf__free(vmlinux);
  if (!known) {
    return {"none",
            "this kernel does not give steal time to the scheduler "
            "(CONFIG_PARAVIRT_TIME_ACCOUNTING, CONFIG_FAIR_GROUP_SCHED): a thread on a CPU at a "
            "probe is counted by wall time, what a hypervisor stole included"};
  }
  if (steal_time_off != 0) {
    return {"kvm_steal_time",
            "KVM's per-CPU steal_time record, checked against the run queue's copy at every "
            "read; a read that fails the check uses that copy (steal_stale windows)"};
  }
  return {"run_queue",
          "the run queues' copies (no KVM steal_time record in this kernel): up to a tick old, so "
          "a window that lost over 1/200 of its CPU time to steal has task-clock left out"};
}

Status PinSharedMaps(iteration_probe_bpf* skel, const std::string& dir) {
  const std::pair<bpf_map*, const char*> shared[] = {
      {skel->maps.events, "events"},
      {skel->maps.inflight, "inflight"},
      {skel->maps.thread_open, "thread_open"},
      {skel->maps.pids, "pids"},
      {skel->maps.wanted_iters, "wanted_iters"},
      {skel->maps.wanted_sls, "wanted_sls"},
      {skel->maps.zero_code_state, "zero_code_state"},
      {skel->maps.stats, "stats"},
      {skel->maps.bss, "bss"},
  };
  for (const auto& [map, name] : shared) {
    std::string path = dir + "/map_" + name;
    int err = bpf_map__set_pin_path(map, path.c_str());
    if (err != 0) return LibbpfError("setting the pin path " + path, err);
  }
  return Status::Ok();
}

}  // namespace

uint64_t IterationProbeSkeleton::Generation(const IterationProbeSkeletonConfig& config) {
  size_t size = 0;
  const void* elf = iteration_probe_bpf__elf_bytes(&size);
  uint64_t h = PinHash(elf, size);
  const uint64_t fixed[] = {RoundRingSize(config.ring_buffer_bytes), config.wakeup_bytes,
                            config.max_seq_len, config.counters ? 1u : 0u};
  return PinHash(fixed, sizeof(fixed), h);
}

Result<std::unique_ptr<IterationProbeSkeleton>> IterationProbeSkeleton::Load(
    const IterationProbeSkeletonConfig& config) {
  InstallLibbpfLogCapture();
  SEQPOINT_RETURN_IF_ERROR(CheckBpfCapabilities());
  SEQPOINT_RETURN_IF_ERROR(CheckBtf(config.btf_path));
  if (config.zero_code.size() > SP_MAX_ZERO_CODE_PROBES) {
    return InvalidArgument(std::to_string(config.zero_code.size()) +
                           " zero-code probes configured; at most " +
                           std::to_string(SP_MAX_ZERO_CODE_PROBES) + " are supported");
  }
  int ringbuf = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, nullptr);
  if (ringbuf < 0) return LibbpfError("probing the kernel for BPF ring buffers", ringbuf);
  if (ringbuf == 0) return Unsupported("this kernel has no BPF ring buffer (Linux 5.8+ needed)");

  ClearLibbpfLog();
  LIBBPF_OPTS(bpf_object_open_opts, open_opts);
  if (!config.btf_path.empty()) open_opts.btf_custom_path = config.btf_path.c_str();
  iteration_probe_bpf* raw = iteration_probe_bpf__open_opts(&open_opts);
  if (raw == nullptr) return LibbpfError("opening the iteration probe BPF object", errno);
  std::unique_ptr<IterationProbeSkeleton> self(new IterationProbeSkeleton(raw));

  self->ring_buffer_bytes_ = RoundRingSize(config.ring_buffer_bytes);
  raw->rodata->max_seq_len = config.max_seq_len;
  raw->rodata->wakeup_bytes = config.wakeup_bytes;
  int err = bpf_map__set_max_entries(raw->maps.events, self->ring_buffer_bytes_);
  if (err != 0) return LibbpfError("sizing the ring buffer", err);

  // Zero-code programs read their probe index from the BPF cookie (Linux 5.15+).
  self->zero_code_supported_ =
      libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_get_attach_cookie, nullptr) > 0;
  if (!self->zero_code_supported_) {
    bpf_program__set_autoload(raw->progs.sp_sl_call, false);
    bpf_program__set_autoload(raw->progs.sp_boundary, false);
    bpf_program__set_autoload(raw->progs.sp_gate, false);
  }

  self->counters_why_not_ = config.counters ? CountersWhyNot() : "turned off";
  raw->rodata->counters_on = self->counters_why_not_.empty() ? 1 : 0;
  // The CPUs whose steal time the counter path subtracts (probe_counters.bpf.h).
  // Off where the kernel has no bpf_loop (Linux < 5.17): threads on a CPU at a probe are then
  // counted by wall time, steal included.
  const int cpus = libbpf_num_possible_cpus();
  const bool loop = libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_loop, nullptr) > 0;
  raw->rodata->steal_cpus = cpus <= 0 || !loop ? 0u : std::min<uint32_t>(cpus, SP_MAX_CPUS);
  raw->rodata->steal_time_off = self->counters_why_not_.empty() ? StealTimeFromRunQueue() : 0;
  if (self->counters_why_not_.empty()) {
    std::tie(self->steal_source_, self->steal_source_why_) =
        StealSource(raw->rodata->steal_cpus, raw->rodata->steal_time_off);
  }
  if (!self->counters_why_not_.empty()) {
    bpf_program__set_autoload(raw->progs.sp_sched_switch, false);
    bpf_program__set_autoload(raw->progs.sp_cnt_exec, false);
    bpf_program__set_autoload(raw->progs.sp_cnt_seed, false);
  }

  if (!config.pin_dir.empty()) SEQPOINT_RETURN_IF_ERROR(PinSharedMaps(raw, config.pin_dir));

  err = iteration_probe_bpf__load(raw);
  if (err != 0) return LibbpfError("loading the iteration probe BPF programs", err);

  for (uint32_t i = 0; i < config.zero_code.size(); ++i) {
    err = bpf_map_update_elem(bpf_map__fd(raw->maps.zero_code_config), &i, &config.zero_code[i],
                              BPF_ANY);
    if (err != 0) return LibbpfError("writing the zero-code probe table", errno);
  }
  return self;
}

IterationProbeSkeleton::~IterationProbeSkeleton() { iteration_probe_bpf__destroy(skel_); }

Result<LinkPtr> IterationProbeSkeleton::AttachUsdt(int pid, const std::string& binary, bool begin) {
  ClearLibbpfLog();
  bpf_program* prog = begin ? skel_->progs.sp_usdt_begin : skel_->progs.sp_usdt_end;
  const char* name = begin ? "iteration_begin" : "iteration_end";
  bpf_link* link = bpf_program__attach_usdt(prog, pid, binary.c_str(), "seqpoint", name, nullptr);
  if (link == nullptr) {
    return LibbpfError("attaching USDT seqpoint:" + std::string(name) + " in " + binary +
                           " for pid " + std::to_string(pid),
                       errno);
  }
  return LinkPtr(link);
}

Result<LinkPtr> IterationProbeSkeleton::AttachZeroCode(int pid, const std::string& binary,
                                                       const std::string& function, uint32_t probe,
                                                       ZeroCodeRole role) {
  if (!zero_code_supported_) {
    return Unsupported(
        "zero-code probes need BPF cookies (Linux 5.15+), which this kernel lacks; "
        "mark iterations with the seqpoint USDT provider instead");
  }
  ClearLibbpfLog();
  LIBBPF_OPTS(bpf_uprobe_opts, opts);
  opts.func_name = function.c_str();
  opts.bpf_cookie = probe | (role == ZeroCodeRole::kBoundary ? SP_COOKIE_ROLE_BOUNDARY
                             : role == ZeroCodeRole::kGate   ? SP_COOKIE_ROLE_GATE
                                                             : 0u);
  bpf_program* prog = role == ZeroCodeRole::kBoundary ? skel_->progs.sp_boundary
                      : role == ZeroCodeRole::kGate   ? skel_->progs.sp_gate
                                                      : skel_->progs.sp_sl_call;
  bpf_link* link = bpf_program__attach_uprobe_opts(prog, pid, binary.c_str(), 0, &opts);
  if (link == nullptr) {
    return LibbpfError(
        "attaching a uprobe to " + function + " in " + binary + " for pid " + std::to_string(pid),
        errno);
  }
  return LinkPtr(link);
}

Status IterationProbeSkeleton::SetZeroCodeConfig(uint32_t index,
                                                 const sp_zero_code_config& config) {
  if (index >= SP_MAX_ZERO_CODE_PROBES) {
    return InvalidArgument("zero-code probe index " + std::to_string(index) + " is out of range");
  }
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.zero_code_config), &index, &config, BPF_ANY) !=
      0) {
    return LibbpfError("writing the zero-code probe table", errno);
  }
  return Status::Ok();
}

void IterationProbeSkeleton::SetHookMode(uint32_t mode) {
  __atomic_store_n(&skel_->bss->hook_mode, mode, __ATOMIC_RELEASE);
}

int IterationProbeSkeleton::events_fd() const { return bpf_map__fd(skel_->maps.events); }
int IterationProbeSkeleton::inflight_fd() const { return bpf_map__fd(skel_->maps.inflight); }
int IterationProbeSkeleton::thread_open_fd() const { return bpf_map__fd(skel_->maps.thread_open); }
int IterationProbeSkeleton::pids_fd() const { return bpf_map__fd(skel_->maps.pids); }
int IterationProbeSkeleton::wanted_iters_fd() const {
  return bpf_map__fd(skel_->maps.wanted_iters);
}
int IterationProbeSkeleton::wanted_sls_fd() const { return bpf_map__fd(skel_->maps.wanted_sls); }
int IterationProbeSkeleton::zero_code_state_fd() const {
  return bpf_map__fd(skel_->maps.zero_code_state);
}
int IterationProbeSkeleton::counter_threads_fd() const {
  return bpf_map__fd(skel_->maps.counter_threads);
}
int IterationProbeSkeleton::counter_procs_fd() const {
  return bpf_map__fd(skel_->maps.counter_procs);
}
int IterationProbeSkeleton::counter_begins_fd() const {
  return bpf_map__fd(skel_->maps.counter_begins);
}

Result<LinkPtr> IterationProbeSkeleton::AttachSchedSwitch() {
  if (!counters_supported()) return Unsupported("probe counters: " + counters_why_not_);
  ClearLibbpfLog();
  bpf_link* link = bpf_program__attach(skel_->progs.sp_sched_switch);
  if (link == nullptr) return LibbpfError("attaching the sched_switch counter program", errno);
  return LinkPtr(link);
}

Result<LinkPtr> IterationProbeSkeleton::AttachCountersExec() {
  if (!counters_supported()) return Unsupported("probe counters: " + counters_why_not_);
  ClearLibbpfLog();
  bpf_link* link = bpf_program__attach(skel_->progs.sp_cnt_exec);
  if (link == nullptr) return LibbpfError("attaching the exec counter program", errno);
  return LinkPtr(link);
}

Status IterationProbeSkeleton::SeedCounterThreads(int pid) {
  if (!counters_supported()) return Unsupported("probe counters: " + counters_why_not_);
  union bpf_iter_link_info info {};
  info.task.pid = static_cast<uint32_t>(pid);  // the threads of this process only (Linux 6.1+)
  LIBBPF_OPTS(bpf_iter_attach_opts, opts);
  opts.link_info = &info;
  opts.link_info_len = sizeof(info);
  ClearLibbpfLog();
  LinkPtr link(bpf_program__attach_iter(skel_->progs.sp_cnt_seed, &opts));
  if (!link) {
    // Older kernels refuse the pid filter: walk every task, the program skips other processes.
    link.reset(bpf_program__attach_iter(skel_->progs.sp_cnt_seed, nullptr));
  }
  if (!link) return LibbpfError("attaching the counter seeding iterator", errno);
  int fd = bpf_iter_create(bpf_link__fd(link.get()));
  if (fd < 0) return LibbpfError("creating the counter seeding iterator", errno);
  char buf[64];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) {
  }
  const int err = errno;
  ::close(fd);
  if (n < 0) return LibbpfError("running the counter seeding iterator", err);
  return Status::Ok();
}

std::array<uint64_t, SP_STAT_COUNT> IterationProbeSkeleton::ReadStats() const {
  std::array<uint64_t, SP_STAT_COUNT> totals{};
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return totals;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(cpus));
  int fd = bpf_map__fd(skel_->maps.stats);
  for (uint32_t i = 0; i < SP_STAT_COUNT; ++i) {
    if (bpf_map_lookup_elem(fd, &i, per_cpu.data()) != 0) continue;
    for (uint64_t v : per_cpu) totals[i] += v;
  }
  return totals;
}

Result<std::set<uint32_t>> LoadedSeqpointProgramIds() {
  static const char* const kOurs[] = {"sp_usdt_begin", "sp_usdt_end", "sp_sl_call",
                                      "sp_boundary",   "sp_exec",     "sp_exit",
                                      "sp_dl_state",   "sp_sched_switch", "sp_gate",
                                      "sp_cnt_exec"};
  std::set<uint32_t> ids;
  uint32_t id = 0;
  errno = 0;
  while (bpf_prog_get_next_id(id, &id) == 0) {
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) continue;  // unloaded meanwhile
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) {
      for (const char* name : kOurs) {
        if (std::strncmp(info.name, name, sizeof(info.name)) == 0) ids.insert(id);
      }
    }
    close(fd);
  }
  if (errno == EPERM) return LibbpfError("listing loaded BPF programs", EPERM);
  return ids;
}

Result<int> CountLoadedSeqpointPrograms() {
  auto ids = LoadedSeqpointProgramIds();
  if (!ids.ok()) return ids.status();
  return static_cast<int>(ids->size());
}

}  // namespace seqpoint::probes
