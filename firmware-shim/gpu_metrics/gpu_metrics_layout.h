// Byte layouts of the amdgpu `gpu_metrics` tables, described as data and laid out at compile
// time with the C rules the kernel's compiler applies to drivers/gpu/drm/amd/include/
// kgd_pp_interface.h: every member at the next multiple of its own alignment (u8/u16/u32/u64
// align to 1/2/4/8, a nested struct to its widest member), the total rounded up to the widest
// alignment. None of these structs is packed, so gaps appear where the kernel header has none
// written (e.g. 4 bytes after the header of gpu_metrics_v1_0 and v2_0, which the header itself
// calls "not naturally aligned"). gpu_metrics_layouts.cpp checks every computed size against
// the kernel's sizeof() with static_assert.
//
// Internal to firmware-shim: callers use gpu_metrics.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace seqpoint::firmware {

// The members the decoder turns into numbers. Members only needed for their size (padding,
// PCIe/XGMI counters, per-partition blocks) are kSkip.
enum class FieldId : uint8_t {
  kSkip,
  kHeader,
  // Temperatures.
  kTempEdge,
  kTempHotspot,
  kTempMem,
  kTempVrGfx,
  kTempVrSoc,
  kTempVrMem,
  kTempHbm,
  kTempGfx,
  kTempSoc,
  kTempCore,
  kTempL3,
  kTempSkin,
  // Activity.
  kGfxActivity,
  kUmcActivity,
  kMmActivity,
  kVcnActivity,
  // Power.
  kAvgSocketPower,
  kCurrSocketPower,
  kCpuPower,
  kSocPower,
  kGfxPower,
  kCorePower,
  kApuPower,
  kDgpuPower,
  kAllCorePower,
  kSysPower,
  kIpuPower,
  // Energy accumulator (15.259 uJ units).
  kEnergyAccumulator,
  // Clocks.
  kAvgGfxclk,
  kAvgSocclk,
  kAvgUclk,
  kAvgFclk,
  kAvgVclk0,
  kAvgDclk0,
  kAvgVclk1,
  kAvgDclk1,
  kCurGfxclk,
  kCurSocclk,
  kCurUclk,
  kCurFclk,
  kCurVclk0,
  kCurDclk0,
  kCurVclk1,
  kCurDclk1,
  kCurCoreclk,
  kCurL3clk,
  // Throttling.
  kThrottleStatus,
  kIndepThrottleStatus,
  kAccumulationCounter,
  kProchotResidencyAcc,
  kPptResidencyAcc,
  kSocketThmResidencyAcc,
  kVrThmResidencyAcc,
  kHbmThmResidencyAcc,
  kResidencyProchot,
  kResidencySpl,
  kResidencyFppt,
  kResidencySppt,
  kResidencyThmCore,
  kResidencyThmGfx,
  kResidencyThmSoc,
  // Fans, link, electrical, time.
  kFanSpeedRpm,
  kFanPwm,
  kPcieLinkWidth,
  kPcieLinkSpeed,
  kVoltageSoc,
  kVoltageGfx,
  kVoltageMem,
  kVoltageCpu,
  kCurrentCpu,
  kCurrentSoc,
  kCurrentGfx,
  kSystemClockCounter,
  kFirmwareTimestamp,
  // Activity and link accumulators (collectors/energy/gpu_metrics_window.h reads them over a
  // window).
  kGfxActivityAcc,
  kMemActivityAcc,
  kPcieBandwidthAcc,
  // Per-link XGMI data accumulators (KB, v1_4+), the partition count and the per-partition
  // blocks (xcp_stats[], v1_6+: their gfx_busy_acc per XCC is decoded by the caller, whose
  // offset inside the block XcpGfxBusyAccOffset gives).
  kXgmiReadDataAcc,
  kXgmiWriteDataAcc,
  kNumPartition,
  kXcpStats,
};

// One struct member: `count` elements of `size` bytes aligned to `align`.
struct FieldSpec {
  FieldId id;
  uint16_t size;
  uint16_t align;
  uint16_t count;
  const char* name;  // the kernel's member name, for messages and tests
};

constexpr FieldSpec U8(FieldId id, const char* name, uint16_t n = 1) { return {id, 1, 1, n, name}; }
constexpr FieldSpec U16(FieldId id, const char* name, uint16_t n = 1) {
  return {id, 2, 2, n, name};
}
constexpr FieldSpec U32(FieldId id, const char* name, uint16_t n = 1) {
  return {id, 4, 4, n, name};
}
constexpr FieldSpec U64(FieldId id, const char* name, uint16_t n = 1) {
  return {id, 8, 8, n, name};
}
// A nested struct member (e.g. amdgpu_xcp_metrics xcp_stats[NUM_XCP]) kept opaque.
constexpr FieldSpec Nested(const char* name, uint32_t size, uint16_t align, uint16_t n) {
  return {FieldId::kSkip, static_cast<uint16_t>(size), align, n, name};
}
// struct metrics_table_header: u16 structure_size, u8 format_revision, u8 content_revision.
constexpr FieldSpec Header() { return {FieldId::kHeader, 4, 2, 1, "common_header"}; }

template <size_t N>
struct ComputedLayout {
  std::array<uint16_t, N> offsets{};
  uint32_t size = 0;   // sizeof(), tail padding included
  uint16_t align = 1;  // alignof()
};

template <size_t N>
constexpr ComputedLayout<N> ComputeLayout(const std::array<FieldSpec, N>& fields) {
  ComputedLayout<N> out;
  uint32_t cursor = 0;
  for (size_t i = 0; i < N; ++i) {
    const uint32_t a = fields[i].align;
    cursor = (cursor + a - 1) / a * a;
    out.offsets[i] = static_cast<uint16_t>(cursor);
    cursor += uint32_t{fields[i].size} * fields[i].count;
    if (a > out.align) out.align = static_cast<uint16_t>(a);
  }
  out.size = (cursor + out.align - 1) / out.align * out.align;
  return out;
}

// Offset of the member called `name`, or UINT32_MAX (compile-time checks and tests).
template <size_t N>
constexpr uint32_t OffsetOf(const std::array<FieldSpec, N>& fields, std::string_view name) {
  const ComputedLayout<N> layout = ComputeLayout(fields);
  for (size_t i = 0; i < N; ++i) {
    if (std::string_view(fields[i].name) == name) return layout.offsets[i];
  }
  return UINT32_MAX;
}

// How a revision encodes its quantities (see gpu_metrics_layouts.cpp for the sources).
enum class ActivityUnit : uint8_t {
  kPercent,         // 0..100
  kCentiPercent,    // 0..10000
  kPercentOrCenti,  // producer-dependent: >100 can only be centi-percent, <=100 is read as %
};

struct UnitRules {
  // Divisors rather than factors: dividing by an exact integer gives the double nearest to the
  // true value (8175 / 100 == 81.75, while 6161 * 0.001 != 6.161).
  double temperature_counts_per_c;  // 1 (degrees C) or 100 (centi-degrees)
  double power_counts_per_w;        // 1 (W) or 1000 (mW)
  ActivityUnit activity;
};

// One decodable revision. Two layouts may share (format, content) and differ by size: the
// kernel changed gpu_metrics_v1_6 and gpu_metrics_v3_0 in place, and structure_size tells
// the variants apart.
struct LayoutInfo {
  uint8_t format_revision;
  uint8_t content_revision;
  uint16_t structure_size;
  const char* kernel_struct;  // "gpu_metrics_v1_3", with a variant note where needed
  std::span<const FieldSpec> fields;
  std::span<const uint16_t> offsets;
  UnitRules units;
};

// Offset of gfx_busy_acc[] inside one xcp_stats element of `element_size` bytes
// (amdgpu_xcp_metrics 168, _v1_1 232, _v1_2 440); UINT32_MAX for another size.
uint32_t XcpGfxBusyAccOffset(uint32_t element_size);

// Every known layout, ordered by (format, content, size).
std::span<const LayoutInfo> AllLayouts();
// The layout for a header, or nullptr. `known_size` (may be null) receives the size of some
// layout with the same (format, content) when only the size differs, else 0.
const LayoutInfo* FindLayout(uint8_t format, uint8_t content, uint16_t structure_size,
                             uint16_t* known_size);

}  // namespace seqpoint::firmware
