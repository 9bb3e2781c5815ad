// See gpu_metrics_window.h. Units: drivers/gpu/drm/amd/include/kgd_pp_interface.h
// ("Utilization Accumulated (%)", "Energy (15.259uJ (2^-16) units)", "PCIE accumulated
// bandwidth (GB/sec)" in v1_4/v1_5, "(Mbps)" from v1_6; accumulation_counter and the
// *_residency_acc members of v1_6). Window averages as RDC and amd-smi compute them:
// d(acc) / d(accumulation_counter).
#include "firmware-shim/gpu_metrics/gpu_metrics_window.h"

#include <algorithm>
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

// Per link: the KB moved, each link on its own (a link that went back is left out alone).
void LinkDeltas(const SmallInstances& a, const SmallInstances& b, const char* what,
                std::vector<std::optional<double>>* out, std::vector<std::string>* left_out) {
  if (!a.any() || !b.any()) return;
  out->assign(std::min(a.count, b.count), std::nullopt);
  for (size_t l = 0; l < out->size(); ++l) {
    auto x = a.at(l), y = b.at(l);
    if (!x || !y) continue;
    if (*y < *x) {
      left_out->push_back(std::string(what) + " link " + std::to_string(l) +
                          ": the accumulator went back (GPU reset or driver reload)");
      continue;
    }
    (*out)[l] = *y - *x;
  }
}

// Per partition: the mean busy % of its XCCs over the window's PMFW updates.
void PartitionBusy(const GpuMetrics& a, const GpuMetrics& b, std::optional<uint64_t> updates,
                   GpuMetricsWindow* w) {
  const size_t n = std::min(a.xcp_count, b.xcp_count);
  if (n == 0) return;
  if (!updates) {
    w->left_out.push_back("xcp gfx_busy: no PMFW update count for the window");
    return;
  }
  w->xcp_gfx_busy_pct.assign(n, std::nullopt);
  for (size_t x = 0; x < n; ++x) {
    const XcpAccumulators &p = a.xcp[x], &q = b.xcp[x];
    double sum = 0;
    int xccs = 0;
    bool back = false;
    for (size_t c = 0; c < p.gfx_busy_acc.size(); ++c) {
      if (((p.present & q.present) >> c & 1u) == 0) continue;
      if (q.gfx_busy_acc[c] < p.gfx_busy_acc[c]) back = true;
      sum += static_cast<double>(q.gfx_busy_acc[c] - p.gfx_busy_acc[c]);
      ++xccs;
    }
    if (back) {
      w->left_out.push_back("xcp " + std::to_string(x) +
                            " gfx_busy: the accumulator went back (GPU reset)");
      continue;
    }
    if (xccs == 0) continue;  // a partition with no XCC populated
    w->xcp_gfx_busy_pct[x] = sum / xccs / static_cast<double>(*updates);
  }
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
  LinkDeltas(a.xgmi_read_kb, b.xgmi_read_kb, "xgmi_read", &w.xgmi_read_kb, &w.left_out);
  LinkDeltas(a.xgmi_write_kb, b.xgmi_write_kb, "xgmi_write", &w.xgmi_write_kb, &w.left_out);
  PartitionBusy(a, b, updates, &w);
  return w;
}

}  // namespace seqpoint::firmware
