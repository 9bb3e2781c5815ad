// The member lists of every gpu_metrics revision the kernel defines, in declaration order, from
// drivers/gpu/drm/amd/include/kgd_pp_interface.h (torvalds/linux). Offsets come from
// ComputeLayout(); each computed size is checked against the kernel's sizeof() below.
//
// Variants: gpu_metrics_v1_6 was first merged with vcn/jpeg activity and throttle_status
// (384 bytes) and later redefined with per-partition xcp_stats (1664 bytes, "Add
// gpu_metrics_v1_6 with activities per partition", amd-gfx 2024-09). gpu_metrics_v3_0 first
// shipped with smu_v14_0_0 at 224 bytes and was extended in place to 264 bytes ("update smu
// v14_0_0 driver if version and metrics table", amd-gfx 2023-11). Both pairs share
// (format, content); structure_size picks the layout.
//
// Units (the kernel header states them only from v1_4 and for v2_4 and v3_0; the others come
// from the drivers that fill the tables, drivers/gpu/drm/amd/pm/swsmu/):
//  - format 1 (dGPU): degrees C, W, percent, MHz (navi10/sienna_cichlid/smu_v13_0_x copy
//    the PMFW values, which the same drivers scale as whole degrees and watts for hwmon);
//    energy_accumulator in 2^-16 J = 15.259 uJ ("Energy (15.259uJ (2^-16) units)", v1_4+;
//    ROCm SMI applies the same 15.3 uJ resolution to v1_0..v1_3).
//  - format 2 (APU): centi-degrees C and mW (renoir/vangogh/yellow_carp divide temperatures
//    by 100 and powers by 1000 for hwmon; v2_4 says so in its comments). Activity is %
//    on Van Gogh firmware with interface >= 3 and centi-% on Renoir, Yellow Carp, SMU 13.0.4
//    and older Van Gogh firmware, hence kPercentOrCenti before v2_4, which states centi.
//  - format 3 (APU): centi-degrees (smu_v14_0_0 divides by 100), mW (stated), activity %
//    or centi-% depending on PMFW version (smu_v14_0_0: fw > 0x5d4600 reports %).
#include <array>

#include "firmware-shim/gpu_metrics/gpu_metrics_layout.h"

namespace seqpoint::firmware {
namespace {

using F = FieldId;

constexpr uint16_t kHbm = 4, kXgmiLinks = 8, kGfxClks = 8, kClks = 4, kVcn = 4, kJpeg = 32,
                   kJpegV1 = 40, kXcc = 8, kXcp = 8;

// Nested per-partition blocks of v1_6..v1_8: amdgpu_xcp_metrics, _v1_1, _v1_2.
constexpr std::array kXcpMetrics = {
    U32(F::kSkip, "gfx_busy_inst", kXcc), U16(F::kSkip, "jpeg_busy", kJpeg),
    U16(F::kSkip, "vcn_busy", kVcn), U64(F::kSkip, "gfx_busy_acc", kXcc)};
constexpr std::array kXcpMetricsV11 = {
    U32(F::kSkip, "gfx_busy_inst", kXcc), U16(F::kSkip, "jpeg_busy", kJpeg),
    U16(F::kSkip, "vcn_busy", kVcn), U64(F::kSkip, "gfx_busy_acc", kXcc),
    U64(F::kSkip, "gfx_below_host_limit_acc", kXcc)};
constexpr std::array kXcpMetricsV12 = {U32(F::kSkip, "gfx_busy_inst", kXcc),
                                       U16(F::kSkip, "jpeg_busy", kJpegV1),
                                       U16(F::kSkip, "vcn_busy", kVcn),
                                       U64(F::kSkip, "gfx_busy_acc", kXcc),
                                       U64(F::kSkip, "gfx_below_host_limit_ppt_acc", kXcc),
                                       U64(F::kSkip, "gfx_below_host_limit_thm_acc", kXcc),
                                       U64(F::kSkip, "gfx_low_utilization_acc", kXcc),
                                       U64(F::kSkip, "gfx_below_host_limit_total_acc", kXcc)};
static_assert(ComputeLayout(kXcpMetrics).size == 168);
static_assert(ComputeLayout(kXcpMetricsV11).size == 232);
static_assert(ComputeLayout(kXcpMetricsV12).size == 440);

constexpr FieldSpec XcpStats(const auto& nested) {
  FieldSpec f = Nested("xcp_stats", ComputeLayout(nested).size, ComputeLayout(nested).align, kXcp);
  f.id = F::kXcpStats;
  return f;
}

// --- format 1: discrete GPUs -------------------------------------------------------------

constexpr std::array kV1_0 = {Header(),
                              U64(F::kSystemClockCounter, "system_clock_counter"),
                              U16(F::kTempEdge, "temperature_edge"),
                              U16(F::kTempHotspot, "temperature_hotspot"),
                              U16(F::kTempMem, "temperature_mem"),
                              U16(F::kTempVrGfx, "temperature_vrgfx"),
                              U16(F::kTempVrSoc, "temperature_vrsoc"),
                              U16(F::kTempVrMem, "temperature_vrmem"),
                              U16(F::kGfxActivity, "average_gfx_activity"),
                              U16(F::kUmcActivity, "average_umc_activity"),
                              U16(F::kMmActivity, "average_mm_activity"),
                              U16(F::kAvgSocketPower, "average_socket_power"),
                              U32(F::kEnergyAccumulator, "energy_accumulator"),
                              U16(F::kAvgGfxclk, "average_gfxclk_frequency"),
                              U16(F::kAvgSocclk, "average_socclk_frequency"),
                              U16(F::kAvgUclk, "average_uclk_frequency"),
                              U16(F::kAvgVclk0, "average_vclk0_frequency"),
                              U16(F::kAvgDclk0, "average_dclk0_frequency"),
                              U16(F::kAvgVclk1, "average_vclk1_frequency"),
                              U16(F::kAvgDclk1, "average_dclk1_frequency"),
                              U16(F::kCurGfxclk, "current_gfxclk"),
                              U16(F::kCurSocclk, "current_socclk"),
                              U16(F::kCurUclk, "current_uclk"),
                              U16(F::kCurVclk0, "current_vclk0"),
                              U16(F::kCurDclk0, "current_dclk0"),
                              U16(F::kCurVclk1, "current_vclk1"),
                              U16(F::kCurDclk1, "current_dclk1"),
                              U32(F::kThrottleStatus, "throttle_status"),
                              U16(F::kFanSpeedRpm, "current_fan_speed"),
                              U8(F::kPcieLinkWidth, "pcie_link_width"),
                              U8(F::kPcieLinkSpeed, "pcie_link_speed")};

// v1_1 .. v1_3 share this prefix; v1_1 stops after temperature_hbm.
#define SEQPOINT_V1_1_MEMBERS                                                                      \
  Header(), U16(F::kTempEdge, "temperature_edge"), U16(F::kTempHotspot, "temperature_hotspot"),    \
      U16(F::kTempMem, "temperature_mem"), U16(F::kTempVrGfx, "temperature_vrgfx"),                \
      U16(F::kTempVrSoc, "temperature_vrsoc"), U16(F::kTempVrMem, "temperature_vrmem"),            \
      U16(F::kGfxActivity, "average_gfx_activity"), U16(F::kUmcActivity, "average_umc_activity"),  \
      U16(F::kMmActivity, "average_mm_activity"), U16(F::kAvgSocketPower, "average_socket_power"), \
      U64(F::kEnergyAccumulator, "energy_accumulator"),                                            \
      U64(F::kSystemClockCounter, "system_clock_counter"),                                         \
      U16(F::kAvgGfxclk, "average_gfxclk_frequency"),                                              \
      U16(F::kAvgSocclk, "average_socclk_frequency"), U16(F::kAvgUclk, "average_uclk_frequency"),  \
      U16(F::kAvgVclk0, "average_vclk0_frequency"), U16(F::kAvgDclk0, "average_dclk0_frequency"),  \
      U16(F::kAvgVclk1, "average_vclk1_frequency"), U16(F::kAvgDclk1, "average_dclk1_frequency"),  \
      U16(F::kCurGfxclk, "current_gfxclk"), U16(F::kCurSocclk, "current_socclk"),                  \
      U16(F::kCurUclk, "current_uclk"), U16(F::kCurVclk0, "current_vclk0"),                        \
      U16(F::kCurDclk0, "current_dclk0"), U16(F::kCurVclk1, "current_vclk1"),                      \
      U16(F::kCurDclk1, "current_dclk1"), U32(F::kThrottleStatus, "throttle_status"),              \
      U16(F::kFanSpeedRpm, "current_fan_speed"), U16(F::kPcieLinkWidth, "pcie_link_width"),        \
      U16(F::kPcieLinkSpeed, "pcie_link_speed"), U16(F::kSkip, "padding"),                         \
      U32(F::kGfxActivityAcc, "gfx_activity_acc"), U32(F::kMemActivityAcc, "mem_activity_acc"),    \
      U16(F::kTempHbm, "temperature_hbm", kHbm)

constexpr std::array kV1_1 = {SEQPOINT_V1_1_MEMBERS};
constexpr std::array kV1_2 = {SEQPOINT_V1_1_MEMBERS,
                              U64(F::kFirmwareTimestamp, "firmware_timestamp")};
constexpr std::array kV1_3 = {SEQPOINT_V1_1_MEMBERS,
                              U64(F::kFirmwareTimestamp, "firmware_timestamp"),
                              U16(F::kVoltageSoc, "voltage_soc"),
                              U16(F::kVoltageGfx, "voltage_gfx"),
                              U16(F::kVoltageMem, "voltage_mem"),
                              U16(F::kSkip, "padding1"),
                              U64(F::kIndepThrottleStatus, "indep_throttle_status")};
#undef SEQPOINT_V1_1_MEMBERS

// The leading members of v1_4 .. v1_8 (hotspot temperature to UMC activity).
#define SEQPOINT_V1_4_HEAD                                                                    \
  Header(), U16(F::kTempHotspot, "temperature_hotspot"), U16(F::kTempMem, "temperature_mem"), \
      U16(F::kTempVrSoc, "temperature_vrsoc"), U16(F::kCurrSocketPower, "curr_socket_power"), \
      U16(F::kGfxActivity, "average_gfx_activity"), U16(F::kUmcActivity, "average_umc_activity")
// The PCIe counters of v1_4 (v1_5+ add two NAK counters after them).
#define SEQPOINT_V1_4_PCIE                                                                 \
  U64(F::kPcieBandwidthAcc, "pcie_bandwidth_acc"), U64(F::kSkip, "pcie_bandwidth_inst"),   \
      U64(F::kSkip, "pcie_l0_to_recov_count_acc"), U64(F::kSkip, "pcie_replay_count_acc"), \
      U64(F::kSkip, "pcie_replay_rover_count_acc")
#define SEQPOINT_V1_5_NAK \
  U32(F::kSkip, "pcie_nak_sent_count_acc"), U32(F::kSkip, "pcie_nak_rcvd_count_acc")
#define SEQPOINT_V1_4_LINKS                                                             \
  U16(F::kPcieLinkWidth, "pcie_link_width"), U16(F::kPcieLinkSpeed, "pcie_link_speed"), \
      U16(F::kSkip, "xgmi_link_width"), U16(F::kSkip, "xgmi_link_speed"),               \
      U32(F::kGfxActivityAcc, "gfx_activity_acc"), U32(F::kMemActivityAcc, "mem_activity_acc")
#define SEQPOINT_V1_4_CLOCKS                                                                   \
  U16(F::kCurGfxclk, "current_gfxclk", kGfxClks), U16(F::kCurSocclk, "current_socclk", kClks), \
      U16(F::kCurVclk0, "current_vclk0", kClks), U16(F::kCurDclk0, "current_dclk0", kClks),    \
      U16(F::kCurUclk, "current_uclk")
#define SEQPOINT_V1_6_RESIDENCY                                   \
  U32(F::kAccumulationCounter, "accumulation_counter"),           \
      U32(F::kProchotResidencyAcc, "prochot_residency_acc"),      \
      U32(F::kPptResidencyAcc, "ppt_residency_acc"),              \
      U32(F::kSocketThmResidencyAcc, "socket_thm_residency_acc"), \
      U32(F::kVrThmResidencyAcc, "vr_thm_residency_acc"),         \
      U32(F::kHbmThmResidencyAcc, "hbm_thm_residency_acc")
#define SEQPOINT_XGMI_DATA                                    \
  U64(F::kXgmiReadDataAcc, "xgmi_read_data_acc", kXgmiLinks), \
      U64(F::kXgmiWriteDataAcc, "xgmi_write_data_acc", kXgmiLinks)

constexpr std::array kV1_4 = {SEQPOINT_V1_4_HEAD,
                              U16(F::kVcnActivity, "vcn_activity", kVcn),
                              U64(F::kEnergyAccumulator, "energy_accumulator"),
                              U64(F::kSystemClockCounter, "system_clock_counter"),
                              U32(F::kThrottleStatus, "throttle_status"),
                              U32(F::kSkip, "gfxclk_lock_status"),
                              SEQPOINT_V1_4_LINKS,
                              SEQPOINT_V1_4_PCIE,
                              SEQPOINT_XGMI_DATA,
                              U64(F::kFirmwareTimestamp, "firmware_timestamp"),
                              SEQPOINT_V1_4_CLOCKS,
                              U16(F::kSkip, "padding")};
constexpr std::array kV1_5 = {SEQPOINT_V1_4_HEAD,
                              U16(F::kVcnActivity, "vcn_activity", kVcn),
                              U16(F::kSkip, "jpeg_activity", kJpeg),
                              U64(F::kEnergyAccumulator, "energy_accumulator"),
                              U64(F::kSystemClockCounter, "system_clock_counter"),
                              U32(F::kThrottleStatus, "throttle_status"),
                              U32(F::kSkip, "gfxclk_lock_status"),
                              SEQPOINT_V1_4_LINKS,
                              SEQPOINT_V1_4_PCIE,
                              SEQPOINT_V1_5_NAK,
                              SEQPOINT_XGMI_DATA,
                              U64(F::kFirmwareTimestamp, "firmware_timestamp"),
                              SEQPOINT_V1_4_CLOCKS,
                              U16(F::kSkip, "padding")};
// gpu_metrics_v1_6 as first merged (vcn/jpeg activity, throttle_status, no partitions).
constexpr std::array kV1_6Original = {SEQPOINT_V1_4_HEAD,
                                      U16(F::kVcnActivity, "vcn_activity", kVcn),
                                      U16(F::kSkip, "jpeg_activity", kJpeg),
                                      U64(F::kEnergyAccumulator, "energy_accumulator"),
                                      U64(F::kSystemClockCounter, "system_clock_counter"),
                                      SEQPOINT_V1_6_RESIDENCY,
                                      U32(F::kThrottleStatus, "throttle_status"),
                                      U32(F::kSkip, "gfxclk_lock_status"),
                                      SEQPOINT_V1_4_LINKS,
                                      SEQPOINT_V1_4_PCIE,
                                      SEQPOINT_V1_5_NAK,
                                      SEQPOINT_XGMI_DATA,
                                      U64(F::kFirmwareTimestamp, "firmware_timestamp"),
                                      SEQPOINT_V1_4_CLOCKS,
                                      U16(F::kSkip, "padding")};
constexpr std::array kV1_6 = {SEQPOINT_V1_4_HEAD,
                              U64(F::kEnergyAccumulator, "energy_accumulator"),
                              U64(F::kSystemClockCounter, "system_clock_counter"),
                              SEQPOINT_V1_6_RESIDENCY,
                              U32(F::kSkip, "gfxclk_lock_status"),
                              SEQPOINT_V1_4_LINKS,
                              SEQPOINT_V1_4_PCIE,
                              SEQPOINT_V1_5_NAK,
                              SEQPOINT_XGMI_DATA,
                              U64(F::kFirmwareTimestamp, "firmware_timestamp"),
                              SEQPOINT_V1_4_CLOCKS,
                              U16(F::kNumPartition, "num_partition"),
                              XcpStats(kXcpMetrics),
                              U32(F::kSkip, "pcie_lc_perf_other_end_recovery")};
// v1_7 and v1_8 differ only in the xcp_stats element type.
#define SEQPOINT_V1_7_MEMBERS(xcp)                                                          \
  SEQPOINT_V1_4_HEAD, U64(F::kSkip, "mem_max_bandwidth"),                                   \
      U64(F::kEnergyAccumulator, "energy_accumulator"),                                     \
      U64(F::kSystemClockCounter, "system_clock_counter"), SEQPOINT_V1_6_RESIDENCY,         \
      U32(F::kSkip, "gfxclk_lock_status"), SEQPOINT_V1_4_LINKS, SEQPOINT_V1_4_PCIE,         \
      SEQPOINT_V1_5_NAK, SEQPOINT_XGMI_DATA, U16(F::kSkip, "xgmi_link_status", kXgmiLinks), \
      U16(F::kSkip, "padding"), U64(F::kFirmwareTimestamp, "firmware_timestamp"),           \
      SEQPOINT_V1_4_CLOCKS, U16(F::kNumPartition, "num_partition"), XcpStats(xcp),          \
      U32(F::kSkip, "pcie_lc_perf_other_end_recovery")
constexpr std::array kV1_7 = {SEQPOINT_V1_7_MEMBERS(kXcpMetricsV11)};
constexpr std::array kV1_8 = {SEQPOINT_V1_7_MEMBERS(kXcpMetricsV12)};
#undef SEQPOINT_V1_7_MEMBERS
#undef SEQPOINT_V1_4_HEAD
#undef SEQPOINT_V1_4_PCIE
#undef SEQPOINT_V1_5_NAK
#undef SEQPOINT_V1_4_LINKS
#undef SEQPOINT_V1_4_CLOCKS
#undef SEQPOINT_V1_6_RESIDENCY
#undef SEQPOINT_XGMI_DATA

// --- format 2: APUs ----------------------------------------------------------------------

#define SEQPOINT_V2_TEMPS                                                   \
  U16(F::kTempGfx, "temperature_gfx"), U16(F::kTempSoc, "temperature_soc"), \
      U16(F::kTempCore, "temperature_core", 8), U16(F::kTempL3, "temperature_l3", 2)
#define SEQPOINT_V2_ACTIVITY \
  U16(F::kGfxActivity, "average_gfx_activity"), U16(F::kMmActivity, "average_mm_activity")
#define SEQPOINT_V2_POWER_CLOCKS                                                                   \
  U16(F::kAvgSocketPower, "average_socket_power"), U16(F::kCpuPower, "average_cpu_power"),         \
      U16(F::kSocPower, "average_soc_power"), U16(F::kGfxPower, "average_gfx_power"),              \
      U16(F::kCorePower, "average_core_power", 8), U16(F::kAvgGfxclk, "average_gfxclk_frequency"), \
      U16(F::kAvgSocclk, "average_socclk_frequency"), U16(F::kAvgUclk, "average_uclk_frequency"),  \
      U16(F::kAvgFclk, "average_fclk_frequency"), U16(F::kAvgVclk0, "average_vclk_frequency"),     \
      U16(F::kAvgDclk0, "average_dclk_frequency"), U16(F::kCurGfxclk, "current_gfxclk"),           \
      U16(F::kCurSocclk, "current_socclk"), U16(F::kCurUclk, "current_uclk"),                      \
      U16(F::kCurFclk, "current_fclk"), U16(F::kCurVclk0, "current_vclk"),                         \
      U16(F::kCurDclk0, "current_dclk"), U16(F::kCurCoreclk, "current_coreclk", 8),                \
      U16(F::kCurL3clk, "current_l3clk", 2), U32(F::kThrottleStatus, "throttle_status"),           \
      U16(F::kFanPwm, "fan_pwm")
#define SEQPOINT_V2_1_MEMBERS                                                        \
  Header(), SEQPOINT_V2_TEMPS, SEQPOINT_V2_ACTIVITY,                                 \
      U64(F::kSystemClockCounter, "system_clock_counter"), SEQPOINT_V2_POWER_CLOCKS, \
      U16(F::kSkip, "padding", 3)
#define SEQPOINT_V2_AVERAGE_TEMPS                                                     \
  U16(F::kSkip, "average_temperature_gfx"), U16(F::kSkip, "average_temperature_soc"), \
      U16(F::kSkip, "average_temperature_core", 8), U16(F::kSkip, "average_temperature_l3", 2)

constexpr std::array kV2_0 = {Header(),
                              U64(F::kSystemClockCounter, "system_clock_counter"),
                              SEQPOINT_V2_TEMPS,
                              SEQPOINT_V2_ACTIVITY,
                              SEQPOINT_V2_POWER_CLOCKS,
                              U16(F::kSkip, "padding")};
constexpr std::array kV2_1 = {SEQPOINT_V2_1_MEMBERS};
constexpr std::array kV2_2 = {SEQPOINT_V2_1_MEMBERS,
                              U64(F::kIndepThrottleStatus, "indep_throttle_status")};
constexpr std::array kV2_3 = {SEQPOINT_V2_1_MEMBERS,
                              U64(F::kIndepThrottleStatus, "indep_throttle_status"),
                              SEQPOINT_V2_AVERAGE_TEMPS};
constexpr std::array kV2_4 = {SEQPOINT_V2_1_MEMBERS,
                              U64(F::kIndepThrottleStatus, "indep_throttle_status"),
                              SEQPOINT_V2_AVERAGE_TEMPS,
                              U16(F::kVoltageCpu, "average_cpu_voltage"),
                              U16(F::kVoltageSoc, "average_soc_voltage"),
                              U16(F::kVoltageGfx, "average_gfx_voltage"),
                              U16(F::kCurrentCpu, "average_cpu_current"),
                              U16(F::kCurrentSoc, "average_soc_current"),
                              U16(F::kCurrentGfx, "average_gfx_current")};
#undef SEQPOINT_V2_TEMPS
#undef SEQPOINT_V2_ACTIVITY
#undef SEQPOINT_V2_POWER_CLOCKS
#undef SEQPOINT_V2_1_MEMBERS
#undef SEQPOINT_V2_AVERAGE_TEMPS

// --- format 3: APUs with IPU (smu_v14_0_0) -----------------------------------------------

#define SEQPOINT_V3_HEAD                                                                         \
  Header(), U16(F::kTempGfx, "temperature_gfx"), U16(F::kTempSoc, "temperature_soc"),            \
      U16(F::kTempCore, "temperature_core", 16), U16(F::kTempSkin, "temperature_skin"),          \
      U16(F::kGfxActivity, "average_gfx_activity"), U16(F::kMmActivity, "average_vcn_activity"), \
      U16(F::kSkip, "average_ipu_activity", 8), U16(F::kSkip, "average_core_c0_activity", 16),   \
      U16(F::kSkip, "average_dram_reads"), U16(F::kSkip, "average_dram_writes")
#define SEQPOINT_V3_POWER                                                                        \
  U64(F::kSystemClockCounter, "system_clock_counter"),                                           \
      U32(F::kAvgSocketPower, "average_socket_power"), U16(F::kIpuPower, "average_ipu_power"),   \
      U32(F::kApuPower, "average_apu_power"), U32(F::kGfxPower, "average_gfx_power"),            \
      U32(F::kDgpuPower, "average_dgpu_power"), U32(F::kAllCorePower, "average_all_core_power"), \
      U16(F::kCorePower, "average_core_power", 16)
#define SEQPOINT_V3_CLOCKS                                                                        \
  U16(F::kAvgGfxclk, "average_gfxclk_frequency"), U16(F::kAvgSocclk, "average_socclk_frequency"), \
      U16(F::kSkip, "average_vpeclk_frequency"), U16(F::kSkip, "average_ipuclk_frequency"),       \
      U16(F::kAvgFclk, "average_fclk_frequency"), U16(F::kAvgVclk0, "average_vclk_frequency")

// As shipped with the first smu_v14_0_0 support (224 bytes).
constexpr std::array kV3_0Original = {SEQPOINT_V3_HEAD,
                                      SEQPOINT_V3_POWER,
                                      U16(F::kSkip, "stapm_power_limit"),
                                      U16(F::kSkip, "current_stapm_power_limit"),
                                      SEQPOINT_V3_CLOCKS,
                                      U16(F::kCurCoreclk, "current_coreclk", 16),
                                      U16(F::kSkip, "current_core_maxfreq"),
                                      U16(F::kSkip, "current_gfx_maxfreq"),
                                      U32(F::kSkip, "time_filter_alphavalue")};
constexpr std::array kV3_0 = {SEQPOINT_V3_HEAD,
                              U16(F::kSkip, "average_ipu_reads"),
                              U16(F::kSkip, "average_ipu_writes"),
                              SEQPOINT_V3_POWER,
                              U16(F::kSysPower, "average_sys_power"),
                              U16(F::kSkip, "stapm_power_limit"),
                              U16(F::kSkip, "current_stapm_power_limit"),
                              SEQPOINT_V3_CLOCKS,
                              U16(F::kAvgUclk, "average_uclk_frequency"),
                              U16(F::kSkip, "average_mpipu_frequency"),
                              U16(F::kCurCoreclk, "current_coreclk", 16),
                              U16(F::kSkip, "current_core_maxfreq"),
                              U16(F::kSkip, "current_gfx_maxfreq"),
                              U32(F::kResidencyProchot, "throttle_residency_prochot"),
                              U32(F::kResidencySpl, "throttle_residency_spl"),
                              U32(F::kResidencyFppt, "throttle_residency_fppt"),
                              U32(F::kResidencySppt, "throttle_residency_sppt"),
                              U32(F::kResidencyThmCore, "throttle_residency_thm_core"),
                              U32(F::kResidencyThmGfx, "throttle_residency_thm_gfx"),
                              U32(F::kResidencyThmSoc, "throttle_residency_thm_soc"),
                              U32(F::kSkip, "time_filter_alphavalue")};
#undef SEQPOINT_V3_HEAD
#undef SEQPOINT_V3_POWER
#undef SEQPOINT_V3_CLOCKS

// sizeof() of each kernel struct on x86-64/arm64 (natural alignment, no packing).
static_assert(ComputeLayout(kV1_0).size == 80);
static_assert(ComputeLayout(kV1_1).size == 96);
static_assert(ComputeLayout(kV1_2).size == 104);
static_assert(ComputeLayout(kV1_3).size == 120);
static_assert(ComputeLayout(kV1_4).size == 288);
static_assert(ComputeLayout(kV1_5).size == 360);
static_assert(ComputeLayout(kV1_6Original).size == 384);
static_assert(ComputeLayout(kV1_6).size == 1664);
static_assert(ComputeLayout(kV1_7).size == 2208);
static_assert(ComputeLayout(kV1_8).size == 3872);
static_assert(ComputeLayout(kV2_0).size == 120);
static_assert(ComputeLayout(kV2_1).size == 120);
static_assert(ComputeLayout(kV2_2).size == 128);
static_assert(ComputeLayout(kV2_3).size == 152);
static_assert(ComputeLayout(kV2_4).size == 168);
static_assert(ComputeLayout(kV3_0Original).size == 224);
static_assert(ComputeLayout(kV3_0).size == 264);
// Spot checks of offsets stated in the kernel (v1_3 voltages follow a u64 at 96) and seen in
// the captured tables (tests/data/gpu_metrics).
static_assert(OffsetOf(kV1_3, "average_socket_power") == 22);
static_assert(OffsetOf(kV1_3, "energy_accumulator") == 24);
static_assert(OffsetOf(kV1_3, "current_gfxclk") == 54);
static_assert(OffsetOf(kV1_3, "voltage_soc") == 104);
static_assert(OffsetOf(kV1_3, "indep_throttle_status") == 112);
static_assert(OffsetOf(kV1_0, "system_clock_counter") == 8);  // after a 4-byte gap
static_assert(OffsetOf(kV1_0, "energy_accumulator") == 36);
static_assert(OffsetOf(kV1_4, "energy_accumulator") == 24);
static_assert(OffsetOf(kV1_5, "energy_accumulator") == 88);
static_assert(OffsetOf(kV1_6, "xcp_stats") == 312);
static_assert(OffsetOf(kV1_6, "pcie_lc_perf_other_end_recovery") == 1656);
static_assert(OffsetOf(kV1_7, "firmware_timestamp") == 288);
static_assert(OffsetOf(kV1_7, "xcp_stats") == 344);
static_assert(OffsetOf(kV2_0, "system_clock_counter") == 8);
static_assert(OffsetOf(kV2_2, "average_gfx_power") == 46);
static_assert(OffsetOf(kV2_2, "current_gfxclk") == 76);
static_assert(OffsetOf(kV2_2, "indep_throttle_status") == 120);
static_assert(OffsetOf(kV3_0, "system_clock_counter") == 104);
static_assert(OffsetOf(kV3_0, "average_apu_power") == 120);
static_assert(OffsetOf(kV3_0, "throttle_residency_prochot") == 228);

constexpr UnitRules kDgpuUnits{1.0, 1.0, ActivityUnit::kPercent};
constexpr UnitRules kApuUnits{100.0, 1000.0, ActivityUnit::kPercentOrCenti};
constexpr UnitRules kApuV24Units{100.0, 1000.0, ActivityUnit::kCentiPercent};

template <const auto& kFields>
struct Laid {
  static constexpr auto kLayout = ComputeLayout(kFields);
};

template <const auto& kFields>
constexpr LayoutInfo Make(uint8_t f, uint8_t c, const char* name, UnitRules units) {
  return {f,
          c,
          static_cast<uint16_t>(Laid<kFields>::kLayout.size),
          name,
          std::span<const FieldSpec>(kFields),
          std::span<const uint16_t>(Laid<kFields>::kLayout.offsets),
          units};
}

constexpr std::array kLayouts = {
    Make<kV1_0>(1, 0, "gpu_metrics_v1_0", kDgpuUnits),
    Make<kV1_1>(1, 1, "gpu_metrics_v1_1", kDgpuUnits),
    Make<kV1_2>(1, 2, "gpu_metrics_v1_2", kDgpuUnits),
    Make<kV1_3>(1, 3, "gpu_metrics_v1_3", kDgpuUnits),
    Make<kV1_4>(1, 4, "gpu_metrics_v1_4", kDgpuUnits),
    Make<kV1_5>(1, 5, "gpu_metrics_v1_5", kDgpuUnits),
    Make<kV1_6Original>(1, 6, "gpu_metrics_v1_6 (first layout, 384 bytes)", kDgpuUnits),
    Make<kV1_6>(1, 6, "gpu_metrics_v1_6", kDgpuUnits),
    Make<kV1_7>(1, 7, "gpu_metrics_v1_7", kDgpuUnits),
    Make<kV1_8>(1, 8, "gpu_metrics_v1_8", kDgpuUnits),
    Make<kV2_0>(2, 0, "gpu_metrics_v2_0", kApuUnits),
    Make<kV2_1>(2, 1, "gpu_metrics_v2_1", kApuUnits),
    Make<kV2_2>(2, 2, "gpu_metrics_v2_2", kApuUnits),
    Make<kV2_3>(2, 3, "gpu_metrics_v2_3", kApuUnits),
    Make<kV2_4>(2, 4, "gpu_metrics_v2_4", kApuV24Units),
    Make<kV3_0Original>(3, 0, "gpu_metrics_v3_0 (first layout, 224 bytes)", kApuUnits),
    Make<kV3_0>(3, 0, "gpu_metrics_v3_0", kApuUnits),
};

}  // namespace

std::span<const LayoutInfo> AllLayouts() { return kLayouts; }

uint32_t XcpGfxBusyAccOffset(uint32_t element_size) {
  static_assert(OffsetOf(kXcpMetrics, "gfx_busy_acc") == 104);
  static_assert(OffsetOf(kXcpMetricsV11, "gfx_busy_acc") == 104);
  static_assert(OffsetOf(kXcpMetricsV12, "gfx_busy_acc") == 120);
  switch (element_size) {
    case ComputeLayout(kXcpMetrics).size:
      return OffsetOf(kXcpMetrics, "gfx_busy_acc");
    case ComputeLayout(kXcpMetricsV11).size:
      return OffsetOf(kXcpMetricsV11, "gfx_busy_acc");
    case ComputeLayout(kXcpMetricsV12).size:
      return OffsetOf(kXcpMetricsV12, "gfx_busy_acc");
    default:
      return UINT32_MAX;
  }
}

const LayoutInfo* FindLayout(uint8_t format, uint8_t content, uint16_t structure_size,
                             uint16_t* known_size) {
  if (known_size != nullptr) *known_size = 0;
  for (const LayoutInfo& l : kLayouts) {
    if (l.format_revision != format || l.content_revision != content) continue;
    if (l.structure_size == structure_size) return &l;
    if (known_size != nullptr) *known_size = l.structure_size;
  }
  return nullptr;
}

}  // namespace seqpoint::firmware
