// Decoder for the amdgpu `gpu_metrics` sysfs table (/sys/class/drm/cardN/device/gpu_metrics):
// every format/content revision the kernel defines (gpu_metrics_v1_0..v1_8 for discrete GPUs,
// v2_0..v2_4 and v3_0 for APUs), into SI-ish units: degrees C, W, percent, MHz, V, A, J.
//
// Invariants:
//  - The header's structure_size is trusted, not the read length: a read may return more bytes
//    (sysfs hands out whole pages); only structure_size bytes are decoded. A structure_size
//    larger than what was read, or a size the kernel never emitted for that revision, is an
//    error, never a guess.
//  - A member whose bits are all ones (0xFFFF, 0xFFFFFFFF, ...) is "not provided by this ASIC"
//    (smu_cmn_init_soft_gpu_metrics fills the table with 0xFF before the driver writes it) and
//    decodes to an empty std::optional, never to a number.
//  - Pure function, no allocation, no I/O: safe to call at every training-iteration boundary
//    and from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace seqpoint::firmware {

// Per-instance values (CPU cores, HBM stacks, XCC clocks): `count` slots as the table defines
// them, each empty when the ASIC does not populate it. Compact on purpose (a value array and a
// presence mask, not optionals): the whole GpuMetrics is rebuilt at every read.
template <size_t N>
struct Instances {
  static constexpr size_t kMax = N;
  static_assert(N <= 32);
  std::array<double, N> value{};  // meaningful where `present` has the bit
  uint32_t present = 0;           // bit i set: slot i holds a value
  uint8_t count = 0;              // slots the table defines

  std::optional<double> at(size_t i) const {
    if (i >= count || (present >> i & 1u) == 0) return std::nullopt;
    return value[i];
  }
  bool any() const { return present != 0; }
  std::optional<double> max() const {
    std::optional<double> out;
    for (size_t i = 0; i < count; ++i) {
      if (auto v = at(i); v && (!out || *v > *out)) out = v;
    }
    return out;
  }
  std::optional<double> sum() const {  // over populated slots; empty when none is
    std::optional<double> out;
    for (size_t i = 0; i < count; ++i) {
      if (auto v = at(i)) out = out.value_or(0.0) + *v;
    }
    return out;
  }
};
using CoreInstances = Instances<16>;  // per CPU core (v3_0 has 16)
using SmallInstances = Instances<8>;  // HBM stacks, L3 slices, XCC clocks, VCN instances,
                                      // XGMI links

// One partition (XCP) of a partitioned part (MI300 CPX/DPX modes; gpu_metrics v1_6+ xcp_stats):
// gfx_busy_acc per XCC, accumulated % summed at each PMFW update like gfx_activity_acc.
struct XcpAccumulators {
  std::array<uint64_t, 8> gfx_busy_acc{};  // meaningful where `present` has the bit
  uint8_t present = 0;                     // bit i: XCC slot i is populated
};

struct Temperatures {                                                // degrees C
  std::optional<double> edge, hotspot, mem, vr_gfx, vr_soc, vr_mem;  // discrete GPUs
  std::optional<double> gfx, soc, skin;                              // APUs
  SmallInstances hbm, l3;
  CoreInstances core;
};

struct Activity {  // percent, 0..100
  std::optional<double> gfx, umc, mm;
  SmallInstances vcn;
  // True where the revision does not fix the unit (v2_0..v2_3, v3_0) and it was inferred: a
  // raw value above 100 can only be centi-percent; one at or below 100 is read as percent.
  bool unit_inferred = false;
};

struct Power {                   // watts
  std::optional<double> socket;  // average_socket_power, or curr_socket_power from v1_4
  bool socket_is_instantaneous = false;
  std::optional<double> cpu, soc, gfx, apu, dgpu, all_cores, system, ipu;
  CoreInstances core;
};

struct Clocks {  // MHz
  std::optional<double> avg_gfx, avg_soc, avg_uclk, avg_fclk, avg_vclk0, avg_dclk0, avg_vclk1,
      avg_dclk1;
  SmallInstances gfx, soc, vclk0, dclk0, l3;  // current; one gfx slot per XCC from v1_4
  CoreInstances core;
  std::optional<double> uclk, fclk, vclk1, dclk1;
};

struct Throttle {
  std::optional<uint64_t> status;        // throttle_status: ASIC-dependent bits
  std::optional<uint64_t> indep_status;  // indep_throttle_status: SMU_THROTTLER_*_BIT
  // Residency accumulators (v1_6+): counts of metrics updates spent in each limiter.
  std::optional<uint64_t> accumulation_counter, prochot_acc, ppt_acc, socket_thermal_acc,
      vr_thermal_acc, hbm_thermal_acc;
  // Residency counters of v3_0 (PM_TIMER cycles).
  std::optional<uint64_t> prochot, spl, fppt, sppt, thermal_core, thermal_gfx, thermal_soc;
};

struct GpuMetrics {
  uint16_t structure_size = 0;
  uint8_t format_revision = 0;
  uint8_t content_revision = 0;
  size_t bytes_read = 0;    // what the read returned (may exceed structure_size)
  const char* layout = "";  // kernel struct name, e.g. "gpu_metrics_v1_3"
  bool is_apu = false;      // format 2 or 3

  Temperatures temperature;
  Activity activity;
  Power power;
  Clocks clock;
  Throttle throttle;

  // Energy accumulator as read, its width and its unit (J per count). Absent on APUs.
  std::optional<uint64_t> energy_accumulator;
  unsigned energy_counter_bits = 0;
  double energy_joules_per_count = 0.0;
  std::optional<double> energy_joules() const;

  std::optional<double> fan_rpm, fan_pwm;
  std::optional<double> pcie_link_width, pcie_link_speed_gts;
  std::optional<double> voltage_soc_v, voltage_gfx_v, voltage_mem_v, voltage_cpu_v;
  std::optional<double> current_cpu_a, current_soc_a, current_gfx_a;
  // Accumulators, as read (gpu_metrics_window.h takes them over a window):
  // gfx/mem activity summed at each PMFW update ("Utilization Accumulated (%)", v1_1+; divide
  // a window's delta by the updates in it: accumulation_counter on v1_6+, else firmware time),
  // PCIe bandwidth summed per update (v1_4+; GB/s on v1_4/v1_5, Mbps from v1_6).
  std::optional<uint64_t> gfx_activity_acc, mem_activity_acc, pcie_bandwidth_acc;
  // Per XGMI link, data read / written since the driver loaded, in KB (v1_4+).
  SmallInstances xgmi_read_kb, xgmi_write_kb;
  // Partitions: num_partition (v1_6+) and, for each of the first num_partition xcp_stats
  // blocks, its accumulators (xcp_count of them; partitions without any XCC populated too).
  std::optional<uint64_t> num_partition;
  std::array<XcpAccumulators, 8> xcp{};
  uint8_t xcp_count = 0;
  std::optional<uint64_t> system_clock_ns;          // driver timestamp (boottime ns)
  std::optional<uint64_t> firmware_timestamp_10ns;  // PMFW timestamp
};

// Decodes one table. `source` names it in error messages (a path, or "blob").
// Errors: InvalidArgument for a truncated table or a header that cannot be a table
// (structure_size < 4); Unsupported for a revision or size this decoder does not know.
Result<GpuMetrics> DecodeGpuMetrics(std::span<const uint8_t> bytes,
                                    std::string_view source = "gpu_metrics");

// Names of the set bits of indep_throttle_status (drivers/gpu/drm/amd/pm/swsmu/inc/
// amdgpu_smu.h SMU_THROTTLER_*_BIT), e.g. {"fppt", "temp_hotspot"}; unknown bits as "bit_N".
std::vector<std::string> IndepThrottlerNames(uint64_t indep_status);
// Classes of the set bits: power (0-15), current (16-31), thermal (32-55), other (56-63).
bool IsPowerThrottled(uint64_t indep_status);
bool IsThermalThrottled(uint64_t indep_status);

// "1.0 1.1 ... 3.0": the revisions DecodeGpuMetrics accepts, for messages and --help.
std::string SupportedRevisions();

}  // namespace seqpoint::firmware
