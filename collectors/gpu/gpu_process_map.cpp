// See gpu_process_map.h. KFD layout: drivers/gpu/drm/amd/amdkfd/kfd_process.c (proc/<pid>/
// vram_<gpuid>) and kfd_topology.c (topology/nodes/<n>/{gpu_id,name,properties}).
#include "collectors/gpu/gpu_process_map.h"

#include <cinttypes>
#include <cstdio>
#include <map>
#include <sstream>

#include "collectors/file_root.h"

namespace seqpoint::collectors {
namespace {

constexpr const char* kKfd = "class/kfd/kfd";

// "key value" lines of a KFD properties file.
std::map<std::string, uint64_t> ParseProperties(const std::string& text) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(text);
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) out[key] = value;
  return out;
}

std::string PciOf(uint64_t domain, uint64_t location_id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", static_cast<unsigned>(domain & 0xffff),
                static_cast<unsigned>((location_id >> 8) & 0xff),
                static_cast<unsigned>((location_id >> 3) & 0x1f),
                static_cast<unsigned>(location_id & 0x7));
  return buf;
}

struct KfdNode {
  std::string name;
  std::map<std::string, uint64_t> properties;
};

// gpu_id -> node, for the GPU nodes of the topology (CPU nodes have gpu_id 0).
Result<std::map<uint32_t, KfdNode>> KfdGpuNodes(const FileRoot& sys) {
  const std::string nodes_dir = std::string(kKfd) + "/topology/nodes";
  auto nodes = sys.ListDir(nodes_dir);
  if (!nodes.ok()) return nodes.status();
  std::map<uint32_t, KfdNode> out;
  for (const std::string& n : *nodes) {
    const std::string dir = nodes_dir + "/" + n;
    auto gpu_id = sys.ReadUint64(dir + "/gpu_id");
    if (!gpu_id.ok() || *gpu_id == 0) continue;
    KfdNode node;
    if (auto name = sys.ReadString(dir + "/name"); name.ok()) node.name = *name;
    if (auto props = sys.ReadString(dir + "/properties"); props.ok()) {
      node.properties = ParseProperties(*props);
    }
    out[static_cast<uint32_t>(*gpu_id)] = std::move(node);
  }
  return out;
}

}  // namespace

std::string ProcessGpu::id() const {
  std::string base = !uuid.empty() ? uuid : pci;
  if (mig()) {
    base += "/gi" + std::to_string(gpu_instance) + "/ci" + std::to_string(compute_instance);
  }
  return base;
}

Result<std::vector<ProcessGpu>> NvidiaGpusOf(const NvmlLibrary& nvml, pid_t host_pid,
                                             std::string* warnings) {
  std::vector<ProcessGpu> out;
  Status last_error;
  size_t answered = 0;
  for (const NvmlDevice& d : nvml.devices()) {
    auto procs = nvml.ComputeProcesses(d);
    if (!procs.ok()) {
      if (procs.status().code() == ErrorCode::kUnsupported) return procs.status();
      last_error = procs.status();
      if (warnings) *warnings += (warnings->empty() ? "" : "; ") + procs.status().message();
      continue;
    }
    ++answered;
    for (const nvmlProcessInfo_t& p : *procs) {
      if (static_cast<pid_t>(p.pid) != host_pid) continue;
      ProcessGpu g;
      g.vendor = "nvidia";
      g.uuid = d.uuid;
      g.pci = d.pci;
      g.name = d.name;
      g.nvml_index = d.index;
      g.gpu_instance = p.gpuInstanceId;
      g.compute_instance = p.computeInstanceId;
      if (p.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) g.used_bytes = p.usedGpuMemory;
      out.push_back(std::move(g));
    }
  }
  if (answered == 0 && !last_error.ok()) return last_error;
  return out;
}

Result<std::vector<ProcessGpu>> AmdGpusOf(const std::string& sys_root, pid_t host_pid) {
  FileRoot sys(sys_root);
  if (!sys.Exists(std::string(kKfd) + "/topology/nodes")) {
    return NotFound("no AMD KFD at " + sys.Path(kKfd) + " (no amdgpu driver with compute here)");
  }
  const std::string proc_dir = std::string(kKfd) + "/proc/" + std::to_string(host_pid);
  if (!sys.Exists(proc_dir)) return std::vector<ProcessGpu>{};  // no KFD context (yet)
  auto entries = sys.ListDir(proc_dir);
  if (!entries.ok()) return entries.status();
  auto nodes = KfdGpuNodes(sys);
  if (!nodes.ok()) return nodes.status();
  std::vector<ProcessGpu> out;
  for (const std::string& e : *entries) {
    if (!e.starts_with("vram_")) continue;
    auto gpu_id = ParseUint64(e.substr(5), proc_dir + "/" + e);
    if (!gpu_id.ok()) continue;
    ProcessGpu g;
    g.vendor = "amd";
    g.kfd_gpu_id = static_cast<uint32_t>(*gpu_id);
    if (auto bytes = sys.ReadUint64(proc_dir + "/" + e); bytes.ok()) g.used_bytes = *bytes;
    auto node = nodes->find(g.kfd_gpu_id);
    if (node == nodes->end()) {
      return IoError(sys.Path(proc_dir + "/" + e) + " names gpu_id " + std::to_string(*gpu_id) +
                     " that no node of " + sys.Path(std::string(kKfd) + "/topology/nodes") +
                     " has: the topology changed (GPU hot-removed?)");
    }
    const auto& props = node->second.properties;
    g.name = node->second.name;
    auto get = [&](const char* key) {
      auto it = props.find(key);
      return it == props.end() ? std::optional<uint64_t>() : std::optional<uint64_t>(it->second);
    };
    if (auto minor = get("drm_render_minor")) g.render_minor = static_cast<uint32_t>(*minor);
    if (auto loc = get("location_id")) g.pci = PciOf(get("domain").value_or(0), *loc);
    if (auto unique = get("unique_id"); unique && *unique != 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "GPU-%016" PRIx64, *unique);
      g.uuid = buf;  // the form ROCR_VISIBLE_DEVICES accepts
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<std::string> ParseVisibleDevices(const std::string& value) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(value);
  while (std::getline(in, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool GpuRecheck::Due(int64_t now_ns) {
  if (last_ns_ && now_ns - *last_ns_ < interval_ns_) return false;
  last_ns_ = now_ns;
  return true;
}

}  // namespace seqpoint::collectors
