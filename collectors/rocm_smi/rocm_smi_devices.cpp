#include "collectors/rocm_smi/rocm_smi_devices.h"

#include <rocm_smi/rocm_smi.h>

#include <cstdio>

#include "collectors/file_root.h"

namespace seqpoint::collectors {
namespace {

// True when sysfs_root/class/drm has a card whose device vendor is AMD (0x1002).
bool HasAmdCard(const std::string& sysfs_root, std::string* why) {
  FileRoot sys(sysfs_root);
  Result<std::vector<std::string>> entries = sys.ListDir("class/drm");
  if (!entries.ok()) {
    *why = entries.status().message();
    return false;
  }
  for (const std::string& e : *entries) {
    if (e.rfind("card", 0) != 0 || e.find('-') != std::string::npos) continue;  // connectors
    Result<uint64_t> vendor = sys.ReadUint64("class/drm/" + e + "/device/vendor");
    if (vendor.ok() && *vendor == 0x1002) return true;
  }
  *why = "no card under " + sys.Path("class/drm") + " has vendor 0x1002";
  return false;
}

std::string PciAddress(uint64_t bdfid) {
  // rsmi_dev_pci_id_get: domain << 32 | bus << 8 | device << 3 | function.
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", static_cast<unsigned>(bdfid >> 32),
                static_cast<unsigned>((bdfid >> 8) & 0xff),
                static_cast<unsigned>((bdfid >> 3) & 0x1f), static_cast<unsigned>(bdfid & 7));
  return buf;
}

}  // namespace

std::string RsmiErrorText(int status) {
  const char* text = nullptr;
  if (rsmi_status_string(static_cast<rsmi_status_t>(status), &text) != RSMI_STATUS_SUCCESS ||
      text == nullptr) {
    return "rsmi status " + std::to_string(status);
  }
  return text;
}

Result<std::unique_ptr<RocmSmiSession>> RocmSmiSession::Open(const std::string& sysfs_root) {
  std::string why;
  if (!HasAmdCard(sysfs_root, &why)) return NotFound("no AMD GPU: " + why);
  rsmi_status_t r = rsmi_init(0);
  if (r != RSMI_STATUS_SUCCESS) {
    return NotFound("rsmi_init found no usable AMD GPU: " + RsmiErrorText(r) +
                    " (needs the amdgpu driver with KFD: /sys/class/kfd/kfd/topology)");
  }
  auto session = std::unique_ptr<RocmSmiSession>(new RocmSmiSession());
  uint32_t n = 0;
  r = rsmi_num_monitor_devices(&n);
  if (r != RSMI_STATUS_SUCCESS || n == 0) {
    return NotFound("ROCm SMI lists no AMD GPU" +
                    (r != RSMI_STATUS_SUCCESS ? ": " + RsmiErrorText(r) : std::string()));
  }
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t bdfid = 0;
    RocmSmiDevice d{i, ""};
    if (rsmi_dev_pci_id_get(i, &bdfid) == RSMI_STATUS_SUCCESS) d.pci = PciAddress(bdfid);
    session->devices_.push_back(d);
  }
  return session;
}

RocmSmiSession::~RocmSmiSession() { rsmi_shut_down(); }

Result<std::vector<RocmSmiDevice>> RocmSmiSession::Select(const std::string& device) const {
  if (device.empty()) return devices_;
  for (const RocmSmiDevice& d : devices_) {
    if (device == std::to_string(d.index) || device == d.pci) {
      return std::vector<RocmSmiDevice>{d};
    }
  }
  std::string known;
  for (const RocmSmiDevice& d : devices_) {
    known += (known.empty() ? "" : ", ") + std::to_string(d.index) + " (" + d.pci + ")";
  }
  return NotFound("no AMD GPU '" + device + "' here; devices: " + known);
}

}  // namespace seqpoint::collectors
