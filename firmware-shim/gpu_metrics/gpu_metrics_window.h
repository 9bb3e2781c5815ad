// amdgpu accumulators over a window: two decoded gpu_metrics tables (at a window's Begin and
// End) turned into window averages and totals (issue 20 item 4).
//
//   gfx_activity, mem_activity   percent, mean over the window: d(gfx_activity_acc) /
//                                d(accumulation_counter) (v1_6+; the accumulators add the
//                                instantaneous % at each PMFW metrics update, the counter counts
//                                the updates). Tables without accumulation_counter (v1_1..v1_5)
//                                do not say how many updates a window held: left out, said why.
//   energy_j                     joules: d(energy_accumulator) x 15.259 uJ (2^-16 J), a 32-bit
//                                counter unwrapped once (v1_0..v1_3), a 64-bit one never wraps.
//   pcie_bandwidth               mean per update of pcie_bandwidth_acc (GB/s on v1_4/v1_5, whose
//                                update count is unknown: left out; Mbps from v1_6)
//   throttle residency           fraction of the window's updates each limiter was active
//                                (prochot, ppt, socket_thm, vr_thm, hbm_thm; v1_6+)
//   elapsed_ns                   firmware time between the tables (firmware_timestamp, 10 ns),
//                                else the driver's system_clock_counter
// A counter that went back (GPU reset, driver reload) voids what depends on it; a table of
// another revision than the first voids the window. Pure functions, any thread.
//
//   xgmi_read_kb, xgmi_write_kb  per XGMI link, KB moved in the window: d(xgmi_*_data_acc[l])
//                                (v1_4+; a link the ASIC leaves 0xFF.. is absent)
//   xcp_gfx_busy_pct             per partition (XCP, v1_6+ xcp_stats, the first num_partition):
//                                percent, the mean over its populated XCCs of
//                                d(gfx_busy_acc[xcc]) / d(accumulation_counter). On a
//                                partitioned part the device-wide gfx_activity is retired
//                                (device-metrics-exporter #139): these are the values to read.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "firmware-shim/gpu_metrics/gpu_metrics.h"

namespace seqpoint::firmware {

struct GpuMetricsWindow {
  std::optional<double> gfx_activity_pct, mem_activity_pct;
  std::optional<double> energy_j;
  std::optional<double> pcie_bandwidth;  // in pcie_bandwidth_unit
  std::string pcie_bandwidth_unit;       // "Mbps" (v1_6+)
  std::optional<double> prochot_fraction, ppt_fraction, socket_thermal_fraction,
      vr_thermal_fraction, hbm_thermal_fraction;
  std::optional<uint64_t> updates;  // PMFW metrics updates in the window (accumulation_counter)
  std::optional<double> elapsed_ns;
  std::vector<std::optional<double>> xgmi_read_kb, xgmi_write_kb;  // per link; empty: none
  std::vector<std::optional<double>> xcp_gfx_busy_pct;             // per partition
  std::vector<std::string> left_out;                               // "gfx_activity: ...why"
};

// The window from table `begin` to table `end` of one GPU.
Result<GpuMetricsWindow> WindowOf(const GpuMetrics& begin, const GpuMetrics& end);

}  // namespace seqpoint::firmware
