#include "agent/store/measured_devices.h"

#include <map>
#include <set>

namespace seqpoint::daemon {

MeasuredDevices SummariseDevices(const std::vector<Measurement>& measurements) {
  struct Acc {
    std::set<std::string> collectors;
    std::set<uint64_t> ordinals;
    uint64_t values = 0;
  };
  std::map<std::string, Acc> by_device;
  MeasuredDevices out;
  for (const Measurement& m : measurements) {
    if (!m.device_recorded) {
      ++out.unrecorded;
      continue;
    }
    if (m.device.empty()) continue;  // a process's own value (time, perf, PAPI)
    Acc& a = by_device[m.device];
    // "nvml:gpu0:power" -> "nvml"; a name without a collector part ("energy_uj") stands alone.
    a.collectors.insert(m.metric.substr(0, m.metric.find(':')));
    a.ordinals.insert(m.ordinal);
    ++a.values;
  }
  for (auto& [device, a] : by_device) {
    out.devices.push_back(
        {device, {a.collectors.begin(), a.collectors.end()}, a.ordinals.size(), a.values});
  }
  return out;
}

}  // namespace seqpoint::daemon
