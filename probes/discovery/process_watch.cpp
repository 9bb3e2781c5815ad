// See process_watch_skeleton.h.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>

#include <cerrno>

#include "probes/discovery/process_watch_skeleton.h"
#include "process_watch_bpf.skel.h"

namespace seqpoint::probes {

Result<std::unique_ptr<ProcessWatchSkeleton>> ProcessWatchSkeleton::Load(
    const std::string& btf_path) {
  InstallLibbpfLogCapture();
  SEQPOINT_RETURN_IF_ERROR(CheckBpfCapabilities());
  ClearLibbpfLog();
  LIBBPF_OPTS(bpf_object_open_opts, open_opts);
  if (!btf_path.empty()) open_opts.btf_custom_path = btf_path.c_str();
  process_watch_bpf* raw = process_watch_bpf__open_opts(&open_opts);
  if (raw == nullptr) return LibbpfError("opening the process watch BPF object", errno);
  std::unique_ptr<ProcessWatchSkeleton> self(new ProcessWatchSkeleton(raw));
  int err = process_watch_bpf__load(raw);
  if (err != 0) return LibbpfError("loading the process watch BPF programs", err);
  return self;
}

ProcessWatchSkeleton::~ProcessWatchSkeleton() {
  links_.clear();
  process_watch_bpf__destroy(skel_);
}

Status ProcessWatchSkeleton::AttachTracepoints() {
  for (bpf_program* prog : {skel_->progs.sp_exec, skel_->progs.sp_exit}) {
    ClearLibbpfLog();
    bpf_link* link = bpf_program__attach(prog);
    if (link == nullptr) {
      return LibbpfError(std::string("attaching tracepoint program ") + bpf_program__name(prog),
                         errno);
    }
    links_.emplace_back(link);
  }
  return Status::Ok();
}

Status ProcessWatchSkeleton::AttachLinker(const std::string& linker) {
  ClearLibbpfLog();
  LIBBPF_OPTS(bpf_uprobe_opts, opts);
  opts.func_name = "_dl_debug_state";
  bpf_link* link =
      bpf_program__attach_uprobe_opts(skel_->progs.sp_dl_state, -1, linker.c_str(), 0, &opts);
  if (link == nullptr) {
    return LibbpfError("attaching a uprobe to _dl_debug_state in " + linker, errno);
  }
  links_.emplace_back(link);
  return Status::Ok();
}

Status ProcessWatchSkeleton::Watch(int pid) {
  uint8_t one = 1;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.watched), &pid, &one, BPF_ANY) != 0) {
    return LibbpfError("watching pid " + std::to_string(pid) + " (at most 8192)", errno);
  }
  return Status::Ok();
}

void ProcessWatchSkeleton::Unwatch(int pid) {
  bpf_map_delete_elem(bpf_map__fd(skel_->maps.watched), &pid);
}

std::vector<std::pair<int, sp_proc_exit>> ProcessWatchSkeleton::RecordedExits() const {
  std::vector<std::pair<int, sp_proc_exit>> out;
  const int fd = bpf_map__fd(skel_->maps.exits);
  // Few entries (exits not taken yet): a walk of the keys, each looked up. An entry the kernel
  // adds meanwhile is seen now or at the next walk.
  uint32_t key = 0, next = 0;
  for (const uint32_t* prev = nullptr; bpf_map_get_next_key(fd, prev, &next) == 0; prev = &key) {
    key = next;
    sp_proc_exit x{};
    if (bpf_map_lookup_elem(fd, &key, &x) == 0) out.emplace_back(static_cast<int>(key), x);
  }
  return out;
}

bool ProcessWatchSkeleton::TakeExit(int pid) {
  return bpf_map_delete_elem(bpf_map__fd(skel_->maps.exits), &pid) == 0;
}

int ProcessWatchSkeleton::events_fd() const { return bpf_map__fd(skel_->maps.proc_events); }

std::array<uint64_t, SP_PROC_STAT_COUNT> ProcessWatchSkeleton::ReadStats() const {
  std::array<uint64_t, SP_PROC_STAT_COUNT> totals{};
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return totals;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(cpus));
  int fd = bpf_map__fd(skel_->maps.proc_stats);
  for (uint32_t i = 0; i < SP_PROC_STAT_COUNT; ++i) {
    if (bpf_map_lookup_elem(fd, &i, per_cpu.data()) != 0) continue;
    for (uint64_t v : per_cpu) totals[i] += v;
  }
  return totals;
}

}  // namespace seqpoint::probes
