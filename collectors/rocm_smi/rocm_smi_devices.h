// ROCm SMI, opened once per user: rsmi_init on construction, rsmi_shut_down on destruction
// (the library reference-counts, so the collector and the energy source may both hold one).
//
// Before calling rsmi_init we look for an AMD card ourselves, through the injectable sysfs
// root: rocm_smi_lib 5.2 prints perror() noise and "Exception caught" to stderr when
// /sys/class/drm is missing (src/rocm_smi_main.cc DiscoverAmdgpuDevices), and a node without
// an AMD GPU must get a clean "not present" instead. Discovery itself is rocm_smi_lib's: it
// reads /sys/class/drm/card*/device (vendor 0x1002, vbios_version), hwmon, and
// /sys/class/kfd/kfd/topology/nodes, which tests replace in a private mount namespace.
//
// Threads: rocm_smi_lib locks per device; we drive it from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace seqpoint::collectors {

struct RocmSmiDevice {
  uint32_t index = 0;  // rsmi device index
  std::string pci;     // "0000:0c:00.0"
};

class RocmSmiSession {
 public:
  // NotFound when the node has no AMD GPU (checked under sysfs_root, see file comment).
  static Result<std::unique_ptr<RocmSmiSession>> Open(const std::string& sysfs_root);
  ~RocmSmiSession();
  RocmSmiSession(const RocmSmiSession&) = delete;
  RocmSmiSession& operator=(const RocmSmiSession&) = delete;

  const std::vector<RocmSmiDevice>& devices() const { return devices_; }
  // The devices a Target::device names: "" = all, an index ("0"), or a PCI address.
  Result<std::vector<RocmSmiDevice>> Select(const std::string& device) const;

 private:
  RocmSmiSession() = default;
  std::vector<RocmSmiDevice> devices_;
};

// "RSMI_STATUS_NOT_SUPPORTED (...)" from the library's own rsmi_status_string.
std::string RsmiErrorText(int status);

}  // namespace seqpoint::collectors
