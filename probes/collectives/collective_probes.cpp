// See collective_probes.h. Symbols: libtorch 1.13's torch/csrc/distributed/c10d/
// ProcessGroupGloo.hpp (the virtual overrides DDP's reducer reaches through ProcessGroup;
// mangled names from `nm -D libtorch_cpu.so`), NCCL's and RCCL's nccl.h (C linkage).
#include "probes/collectives/collective_probes.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include "collective_probe_bpf.skel.h"
#include "probes/collectives/collective_probe.h"
#include "probes/discovery/elf_file.h"
#include "probes/discovery/proc_reader.h"
#include "probes/zero_code_probe.h"

namespace seqpoint::probes {
namespace {

std::vector<CollectiveFunction> MakeFunctions() {
  std::vector<CollectiveFunction> f;
  const char* gloo[] = {
      "_ZN4c10d16ProcessGroupGloo9allreduceERSt6vectorIN2at6TensorESaIS3_EERKNS_"
      "16AllreduceOptionsE",
      "_ZN4c10d16ProcessGroupGloo19allreduce_coalescedERSt6vectorIN2at6TensorESaIS3_EERKNS_"
      "25AllreduceCoalescedOptionsE",
      "_ZN4c10d16ProcessGroupGloo14reduce_scatterERSt6vectorIN2at6TensorESaIS3_EERS1_IS5_SaIS5_"
      "EERKNS_20ReduceScatterOptionsE",
      "_ZN4c10d16ProcessGroupGloo9allgatherERSt6vectorIS1_IN2at6TensorESaIS3_EESaIS5_EERS5_RKNS_"
      "16AllgatherOptionsE",
      "_ZN4c10d16ProcessGroupGloo15_allgather_baseERN2at6TensorES3_RKNS_16AllgatherOptionsE",
  };
  for (const char* s : gloo) f.push_back({"gloo", "libtorch_cpu.so", s});
  for (const char* lib : {"libnccl.so", "librccl.so"}) {
    const std::string name = std::string(lib) == "libnccl.so" ? "nccl" : "rccl";
    for (const char* s : {"ncclAllReduce", "ncclReduceScatter", "ncclAllGather", "ncclGroupEnd"})
      f.push_back({name, lib, s});
  }
  return f;
}

uint64_t RoundRing(uint32_t bytes) {
  uint64_t size = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  while (size < bytes) size <<= 1;
  return size;
}

}  // namespace

const std::vector<CollectiveFunction>& CollectiveFunctions() {
  static const std::vector<CollectiveFunction> functions = MakeFunctions();
  return functions;
}

Result<std::vector<CollectiveTarget>> FindCollectiveTargets(
    const std::string& proc_root, int pid, const std::vector<CollectiveFunction>& functions) {
  auto mapped = ReadExecutableMappings(proc_root, pid);
  if (!mapped.ok()) return mapped.status();
  std::vector<CollectiveTarget> out;
  for (uint32_t i = 0; i < functions.size(); ++i) {
    for (const Mapping& m : *mapped) {
      if (!LibraryMatches(functions[i].library, m.path)) continue;
      auto has = HasFunctionSymbol(m.open_path, functions[i].symbol);
      if (!has.ok() || !*has) continue;  // another build of the library: not this function
      out.push_back({i, m.path, m.open_path});
      break;
    }
  }
  return out;
}

Result<std::unique_ptr<CollectiveProbes>> CollectiveProbes::Create(
    const CollectiveProbesOptions& options) {
  InstallLibbpfLogCapture();
  SEQPOINT_RETURN_IF_ERROR(CheckBpfCapabilities());
  int ringbuf = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, nullptr);
  if (ringbuf <= 0) return Unsupported("this kernel has no BPF ring buffer (Linux 5.8+ needed)");
  if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_get_attach_cookie, nullptr) <= 0) {
    return Unsupported(
        "collective probes need BPF cookies (Linux 5.15+), which this kernel lacks: stragglers "
        "are not named on this node");
  }
  if (options.wakeup_bytes == 0) return InvalidArgument("collective probes: wakeup_bytes is 0");
  std::unique_ptr<CollectiveProbes> self(new CollectiveProbes());
  self->options_ = options;
  ClearLibbpfLog();
  collective_probe_bpf* skel = collective_probe_bpf__open();
  if (skel == nullptr) return LibbpfError("opening the collective probe BPF object", errno);
  self->skel_ = skel;
  skel->rodata->wakeup_bytes = options.wakeup_bytes;
  int err = bpf_map__set_max_entries(skel->maps.arrivals, RoundRing(options.ring_buffer_bytes));
  if (err != 0) return LibbpfError("sizing the collective ring buffer", err);
  err = collective_probe_bpf__load(skel);
  if (err != 0) return LibbpfError("loading the collective probe BPF program", err);
  auto ring = RingReader::Open(bpf_map__fd(skel->maps.arrivals));
  if (!ring.ok()) return ring.status();
  self->ring_ = std::move(*ring);
  return self;
}

CollectiveProbes::~CollectiveProbes() {
  reaper_.reset();  // closes the detached processes' links, joins its thread
  links_.clear();
  ring_.reset();
  if (skel_ != nullptr) collective_probe_bpf__destroy(skel_);
}

Result<int> CollectiveProbes::AttachPid(int pid) {
  auto targets = FindCollectiveTargets(options_.proc_root, pid, options_.functions);
  if (!targets.ok()) return targets.status();
  if (targets->empty()) {
    return NotFound("process " + std::to_string(pid) +
                    " maps no known collective function (gloo through libtorch_cpu.so, NCCL, "
                    "RCCL): its arrivals are not timed");
  }
  if (links_.count(pid) == 0) reaper_->WaitFor(pid);  // detached moments ago: old links go first
  const LinkReaper::AttachGuard attaching = reaper_->Attaching();  // no libbpf destroy meanwhile
  std::vector<Link>& links = links_[pid];
  int added = 0;
  for (const CollectiveTarget& t : *targets) {
    const std::string key = std::to_string(t.function) + ":" + t.open_path;
    bool have = false;
    for (const Link& l : links) have = have || l.key == key;
    if (have) continue;
    const CollectiveFunction& f = options_.functions[t.function];
    ClearLibbpfLog();
    LIBBPF_OPTS(bpf_uprobe_opts, opts);
    opts.func_name = f.symbol.c_str();
    opts.bpf_cookie = t.function;
    bpf_link* link = bpf_program__attach_uprobe_opts(skel_->progs.sp_collective_entry, pid,
                                                     t.open_path.c_str(), 0, &opts);
    if (link == nullptr) {
      return LibbpfError("attaching a uprobe to " + f.symbol + " in " + t.mapped_path +
                             " for pid " + std::to_string(pid),
                         errno);
    }
    links.push_back({key, LinkPtr(link)});
    ++added;
  }
  return added;
}

void CollectiveProbes::DetachPid(int pid) {
  auto it = links_.find(pid);
  if (it == links_.end()) return;
  std::vector<LinkPtr> links;
  for (Link& l : it->second) links.push_back(std::move(l.link));
  links_.erase(it);
  reaper_->Add(pid, std::move(links));
}

std::vector<std::string> CollectiveProbes::Attached(int pid) const {
  std::vector<std::string> out;
  auto it = links_.find(pid);
  if (it == links_.end()) return out;
  for (const Link& l : it->second) {
    const uint32_t i = static_cast<uint32_t>(std::stoul(l.key));
    out.push_back(options_.functions[i].name + ":" + options_.functions[i].symbol + " in " +
                  l.key.substr(l.key.find(':') + 1));
  }
  return out;
}

Result<int> CollectiveProbes::Poll(int timeout_ms,
                                   const std::function<void(const CollectiveArrival&)>& sink) {
  auto woke = ring_->Wait(timeout_ms);
  if (!woke.ok()) return woke.status();
  int n = ring_->Read([&](const void* data, size_t size) {
    if (size < sizeof(sp_collective_event)) return;
    const auto* e = static_cast<const sp_collective_event*>(data);
    ++received_;
    const int pid = static_cast<int>(e->pid);
    if (links_.count(pid) == 0 && reaper_->Pending(pid)) return;  // made as it was detached
    sink({e->pid, e->tid, e->ts_ns, e->function});
  });
  ring_->Commit();
  return n;
}

CollectiveProbeStats CollectiveProbes::stats() const {
  CollectiveProbeStats s;
  s.received = received_;
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return s;
  std::vector<uint64_t> values(static_cast<size_t>(cpus));
  uint64_t* fields[] = {&s.hits, &s.lost, &s.wakeups};
  for (uint32_t key = 0; key < SP_COLL_STAT_COUNT; ++key) {
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.coll_stats), &key, values.data()) != 0)
      continue;
    for (uint64_t v : values) *fields[key] += v;
  }
  return s;
}

}  // namespace seqpoint::probes
