// See gpu_metrics_window.h. Units: drivers/gpu/drm/amd/include/kgd_pp_interface.h
// ("Utilization Accumulated (%)", "Energy (15.259uJ (2^-16) units)", "PCIE accumulated
// bandwidth (GB/sec)" in v1_4/v1_5, "(Mbps)" from v1_6; accumulation_counter and the
// *_residency_acc members of v1_6). Window averages as RDC and amd-smi compute them:
// d(acc) / d(accumulation_counter).
#include "firmware-shim/gpu_metrics_window.h"

#include <cstring>

namespace seqpoint::firmware {
namespace {

// end - begin of an accumulator present in both; absent (and why) otherwise.
std::optional<uint64_t> Delta(const std::optional<uint64_t>& a, const std::optional<uint64_t>& b,
                              const char* what, std::vector<std::string>* left_out) {
  if (!a || !b) return std::nullopt;
  if (*b < *a) {
    left_out->push_back(std::string(what) +
                        ": the accumulator went back (GPU reset or driver reload in the window)");
    return std::nullopt;
  }
  return *b - *a;
}

}  // namespace

Result<GpuMetricsWindow> WindowOf(const GpuMetrics& a, const GpuMetrics& b) {
  if (a.format_revision != b.format_revision || a.content_revision != b.content_revision ||
      a.structure_size != b.structure_size) {
    return InvalidArgument(std::string("gpu_metrics window: the tables differ (") + a.layout +
                           " then " + b.layout + "): the driver changed in the window");
  }
  GpuMetricsWindow w;
  if (a.firmware_timestamp_10ns && b.firmware_timestamp_10ns &&
      *b.firmware_timestamp_10ns >= *a.firmware_timestamp_10ns) {
    w.elapsed_ns =
        10.0 * static_cast<double>(*b.firmware_timestamp_10ns - *a.firmware_timestamp_10ns);
  } else if (a.system_clock_ns && b.system_clock_ns && *b.system_clock_ns >= *a.system_clock_ns) {
    w.elapsed_ns = static_cast<double>(*b.system_clock_ns - *a.system_clock_ns);
  }

  // Energy: unwrap a 32-bit counter once; a 64-bit one going back is a reset.
  if (a.energy_accumulator && b.energy_accumulator && a.energy_joules_per_count > 0) {
    uint64_t ra = *a.energy_accumulator, rb = *b.energy_accumulator;
    if (rb >= ra) {
      w.energy_j = static_cast<double>(rb - ra) * a.energy_joules_per_count;
    } else if (a.energy_counter_bits < 64) {
      const uint64_t range = uint64_t{1} << a.energy_counter_bits;
      const uint64_t forward = rb + range - ra;
      if (forward <= range / 2) {
        w.energy_j = static_cast<double>(forward) * a.energy_joules_per_count;
      } else {
        w.left_out.push_back(
            "energy: the accumulator went back by more than half its range "
            "(reset, not a wrap)");
      }
    } else {
      w.left_out.push_back("energy: the 64-bit accumulator went back (GPU reset)");
    }
  }

  auto updates = Delta(a.throttle.accumulation_counter, b.throttle.accumulation_counter,
                       "accumulation_counter", &w.left_out);
  if (updates && *updates == 0) {
    w.left_out.push_back(
        "every accumulator: no PMFW metrics update in the window (read "
        "the tables further apart)");
    updates.reset();
  }
  w.updates = updates;
  auto mean = [&](const std::optional<uint64_t>& x, const std::optional<uint64_t>& y,
                  const char* what, std::optional<double>* out) {
    if (!x || !y) {
      w.left_out.push_back(std::string(what) + ": not provided by this ASIC (" + a.layout + ")");
      return;
    }
    auto d = Delta(x, y, what, &w.left_out);
    if (!d) return;
    if (!updates) {
      if (!a.throttle.accumulation_counter) {
        w.left_out.push_back(std::string(what) + ": " + a.layout +
                             " has no accumulation_counter: the window's update count is "
                             "unknown, so no mean");
      }
      return;
    }
    *out = static_cast<double>(*d) / static_cast<double>(*updates);
  };
  mean(a.gfx_activity_acc, b.gfx_activity_acc, "gfx_activity", &w.gfx_activity_pct);
  mean(a.mem_activity_acc, b.mem_activity_acc, "mem_activity", &w.mem_activity_pct);
  mean(a.pcie_bandwidth_acc, b.pcie_bandwidth_acc, "pcie_bandwidth", &w.pcie_bandwidth);
  if (w.pcie_bandwidth) w.pcie_bandwidth_unit = "Mbps";  // only v1_6+ has the counter
  const Throttle &ta = a.throttle, &tb = b.throttle;
  mean(ta.prochot_acc, tb.prochot_acc, "prochot_residency", &w.prochot_fraction);
  mean(ta.ppt_acc, tb.ppt_acc, "ppt_residency", &w.ppt_fraction);
  mean(ta.socket_thermal_acc, tb.socket_thermal_acc, "socket_thm_residency",
       &w.socket_thermal_fraction);
  mean(ta.vr_thermal_acc, tb.vr_thermal_acc, "vr_thm_residency", &w.vr_thermal_fraction);
  mean(ta.hbm_thermal_acc, tb.hbm_thermal_acc, "hbm_thm_residency", &w.hbm_thermal_fraction);
  return w;
}

}  // namespace seqpoint::firmware
