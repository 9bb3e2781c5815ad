// Decoder for gpu_metrics tables: walks the layout of the table's revision (gpu_metrics_layout.h)
// and converts each member it knows to SI-ish units with the revision's UnitRules. Reads are
// bounds-checked against structure_size, which itself is checked against the bytes read.
#include "firmware-shim/gpu_metrics/gpu_metrics.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "firmware-shim/gpu_metrics/gpu_metrics_layout.h"

namespace seqpoint::firmware {
namespace {

// Little-endian read of `size` (1, 2, 4 or 8) bytes. The table is little-endian (amdgpu hosts
// are); on a big-endian host the bytes are assembled one by one instead.
template <typename T>
uint64_t Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline uint64_t ReadLe(const uint8_t* p, unsigned size) {
  if constexpr (std::endian::native == std::endian::little) {
    switch (size) {
      case 1:
        return p[0];
      case 2:
        return Load<uint16_t>(p);
      case 4:
        return Load<uint32_t>(p);
      case 8:
        return Load<uint64_t>(p);
      default:
        break;
    }
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < size && i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

uint64_t AllOnes(unsigned size) {
  return size >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
}

enum class Quantity { kTemperature, kActivity, kPower, kClock, kMilli, kTenth, kPlain };

// A per-instance array, whatever its capacity.
struct InstancesRef {
  double* value = nullptr;
  uint32_t* present = nullptr;
  uint8_t* count = nullptr;
  size_t capacity = 0;

  InstancesRef() = default;
  template <size_t N>
  explicit InstancesRef(Instances<N>* in)
      : value(in->value.data()), present(&in->present), count(&in->count), capacity(N) {}
};

// Where a decoded value goes: a scalar, a per-instance array or an exact integer.
struct Slot {
  Quantity quantity = Quantity::kPlain;
  std::optional<double>* scalar = nullptr;
  InstancesRef instances;
  std::optional<uint64_t>* integer = nullptr;
};

Slot Scalar(Quantity q, std::optional<double>* v) {
  Slot s;
  s.quantity = q;
  s.scalar = v;
  return s;
}

template <size_t N>
Slot Array(Quantity q, Instances<N>* in) {
  Slot s;
  s.quantity = q;
  s.instances = InstancesRef(in);
  return s;
}

Slot Integer(std::optional<uint64_t>* v) {
  Slot s;
  s.integer = v;
  return s;
}

Slot SlotFor(FieldId id, GpuMetrics& m) {
  using F = FieldId;
  using Q = Quantity;
  Temperatures& t = m.temperature;
  Clocks& c = m.clock;
  Power& p = m.power;
  Throttle& th = m.throttle;
  switch (id) {
    case F::kTempEdge:
      return Scalar(Q::kTemperature, &t.edge);
    case F::kTempHotspot:
      return Scalar(Q::kTemperature, &t.hotspot);
    case F::kTempMem:
      return Scalar(Q::kTemperature, &t.mem);
    case F::kTempVrGfx:
      return Scalar(Q::kTemperature, &t.vr_gfx);
    case F::kTempVrSoc:
      return Scalar(Q::kTemperature, &t.vr_soc);
    case F::kTempVrMem:
      return Scalar(Q::kTemperature, &t.vr_mem);
    case F::kTempHbm:
      return Array(Q::kTemperature, &t.hbm);
    case F::kTempGfx:
      return Scalar(Q::kTemperature, &t.gfx);
    case F::kTempSoc:
      return Scalar(Q::kTemperature, &t.soc);
    case F::kTempCore:
      return Array(Q::kTemperature, &t.core);
    case F::kTempL3:
      return Array(Q::kTemperature, &t.l3);
    case F::kTempSkin:
      return Scalar(Q::kTemperature, &t.skin);
    case F::kGfxActivity:
      return Scalar(Q::kActivity, &m.activity.gfx);
    case F::kUmcActivity:
      return Scalar(Q::kActivity, &m.activity.umc);
    case F::kMmActivity:
      return Scalar(Q::kActivity, &m.activity.mm);
    case F::kVcnActivity:
      return Array(Q::kActivity, &m.activity.vcn);
    case F::kAvgSocketPower:
      return Scalar(Q::kPower, &p.socket);
    case F::kCurrSocketPower:
      return Scalar(Q::kPower, &p.socket);
    case F::kCpuPower:
      return Scalar(Q::kPower, &p.cpu);
    case F::kSocPower:
      return Scalar(Q::kPower, &p.soc);
    case F::kGfxPower:
      return Scalar(Q::kPower, &p.gfx);
    case F::kCorePower:
      return Array(Q::kPower, &p.core);
    case F::kApuPower:
      return Scalar(Q::kPower, &p.apu);
    case F::kDgpuPower:
      return Scalar(Q::kPower, &p.dgpu);
    case F::kAllCorePower:
      return Scalar(Q::kPower, &p.all_cores);
    case F::kSysPower:
      return Scalar(Q::kPower, &p.system);
    case F::kIpuPower:
      return Scalar(Q::kPower, &p.ipu);
    case F::kEnergyAccumulator:
      return Integer(&m.energy_accumulator);
    case F::kAvgGfxclk:
      return Scalar(Q::kClock, &c.avg_gfx);
    case F::kAvgSocclk:
      return Scalar(Q::kClock, &c.avg_soc);
    case F::kAvgUclk:
      return Scalar(Q::kClock, &c.avg_uclk);
    case F::kAvgFclk:
      return Scalar(Q::kClock, &c.avg_fclk);
    case F::kAvgVclk0:
      return Scalar(Q::kClock, &c.avg_vclk0);
    case F::kAvgDclk0:
      return Scalar(Q::kClock, &c.avg_dclk0);
    case F::kAvgVclk1:
      return Scalar(Q::kClock, &c.avg_vclk1);
    case F::kAvgDclk1:
      return Scalar(Q::kClock, &c.avg_dclk1);
    case F::kCurGfxclk:
      return Array(Q::kClock, &c.gfx);
    case F::kCurSocclk:
      return Array(Q::kClock, &c.soc);
    case F::kCurUclk:
      return Scalar(Q::kClock, &c.uclk);
    case F::kCurFclk:
      return Scalar(Q::kClock, &c.fclk);
    case F::kCurVclk0:
      return Array(Q::kClock, &c.vclk0);
    case F::kCurDclk0:
      return Array(Q::kClock, &c.dclk0);
    case F::kCurVclk1:
      return Scalar(Q::kClock, &c.vclk1);
    case F::kCurDclk1:
      return Scalar(Q::kClock, &c.dclk1);
    case F::kCurCoreclk:
      return Array(Q::kClock, &c.core);
    case F::kCurL3clk:
      return Array(Q::kClock, &c.l3);
    case F::kThrottleStatus:
      return Integer(&th.status);
    case F::kIndepThrottleStatus:
      return Integer(&th.indep_status);
    case F::kAccumulationCounter:
      return Integer(&th.accumulation_counter);
    case F::kGfxActivityAcc:
      return Integer(&m.gfx_activity_acc);
    case F::kMemActivityAcc:
      return Integer(&m.mem_activity_acc);
    case F::kPcieBandwidthAcc:
      return Integer(&m.pcie_bandwidth_acc);
    case F::kProchotResidencyAcc:
      return Integer(&th.prochot_acc);
    case F::kPptResidencyAcc:
      return Integer(&th.ppt_acc);
    case F::kSocketThmResidencyAcc:
      return Integer(&th.socket_thermal_acc);
    case F::kVrThmResidencyAcc:
      return Integer(&th.vr_thermal_acc);
    case F::kHbmThmResidencyAcc:
      return Integer(&th.hbm_thermal_acc);
    case F::kResidencyProchot:
      return Integer(&th.prochot);
    case F::kResidencySpl:
      return Integer(&th.spl);
    case F::kResidencyFppt:
      return Integer(&th.fppt);
    case F::kResidencySppt:
      return Integer(&th.sppt);
    case F::kResidencyThmCore:
      return Integer(&th.thermal_core);
    case F::kResidencyThmGfx:
      return Integer(&th.thermal_gfx);
    case F::kResidencyThmSoc:
      return Integer(&th.thermal_soc);
    case F::kFanSpeedRpm:
      return Scalar(Q::kPlain, &m.fan_rpm);
    case F::kFanPwm:
      return Scalar(Q::kPlain, &m.fan_pwm);
    case F::kPcieLinkWidth:
      return Scalar(Q::kPlain, &m.pcie_link_width);
    case F::kPcieLinkSpeed:
      return Scalar(Q::kTenth, &m.pcie_link_speed_gts);  // 0.1 GT/s
    case F::kVoltageSoc:
      return Scalar(Q::kMilli, &m.voltage_soc_v);  // mV
    case F::kVoltageGfx:
      return Scalar(Q::kMilli, &m.voltage_gfx_v);
    case F::kVoltageMem:
      return Scalar(Q::kMilli, &m.voltage_mem_v);
    case F::kVoltageCpu:
      return Scalar(Q::kMilli, &m.voltage_cpu_v);
    case F::kCurrentCpu:
      return Scalar(Q::kMilli, &m.current_cpu_a);  // mA
    case F::kCurrentSoc:
      return Scalar(Q::kMilli, &m.current_soc_a);
    case F::kCurrentGfx:
      return Scalar(Q::kMilli, &m.current_gfx_a);
    case F::kSystemClockCounter:
      return Integer(&m.system_clock_ns);
    case F::kFirmwareTimestamp:
      return Integer(&m.firmware_timestamp_10ns);
    case F::kXgmiReadDataAcc:
      return Array(Q::kPlain, &m.xgmi_read_kb);
    case F::kXgmiWriteDataAcc:
      return Array(Q::kPlain, &m.xgmi_write_kb);
    case F::kNumPartition:
      return Integer(&m.num_partition);
    case F::kXcpStats:  // nested blocks: DecodeXcpStats
    case F::kSkip:
    case F::kHeader:
      break;
  }
  return {};
}

inline double Convert(Quantity q, uint64_t raw, const UnitRules& units, bool* inferred) {
  const double v = static_cast<double>(raw);
  switch (q) {
    case Quantity::kTemperature:
      return v / units.temperature_counts_per_c;
    case Quantity::kPower:
      return v / units.power_counts_per_w;
    case Quantity::kMilli:
      return v / 1000.0;
    case Quantity::kTenth:
      return v / 10.0;
    case Quantity::kActivity:
      switch (units.activity) {
        case ActivityUnit::kPercent:
          return v;
        case ActivityUnit::kCentiPercent:
          return v / 100.0;
        case ActivityUnit::kPercentOrCenti:
          *inferred = true;
          return raw > 100 ? v / 100.0 : v;
      }
      return v;
    case Quantity::kClock:
    case Quantity::kPlain:
      return v;
  }
  return v;
}

}  // namespace

std::optional<double> GpuMetrics::energy_joules() const {
  if (!energy_accumulator) return std::nullopt;
  return static_cast<double>(*energy_accumulator) * energy_joules_per_count;
}

namespace {

std::string Revision(uint8_t format, uint8_t content) {
  return std::to_string(format) + "." + std::to_string(content);
}

// The error for a header no layout matches. Kept out of the decode path: strings are built only
// when something is wrong.
Status HeaderError(std::string_view source, size_t bytes, uint16_t structure_size, uint8_t format,
                   uint8_t content, uint16_t known_size) {
  const std::string src(source);
  if (bytes < 4) {
    return InvalidArgument(src + ": " + std::to_string(bytes) +
                           " bytes is shorter than the 4-byte metrics_table_header; the read was "
                           "truncated or the file is not a gpu_metrics table");
  }
  const std::string rev = Revision(format, content);
  if (structure_size < 4) {
    return InvalidArgument(src + ": header says structure_size " + std::to_string(structure_size) +
                           " (revision " + rev +
                           "), smaller than the header itself: not a gpu_metrics table");
  }
  if (known_size != 0) {
    return Unsupported(src + ": gpu_metrics revision " + rev + " with structure_size " +
                       std::to_string(structure_size) + "; the kernel's layouts of " + rev +
                       " have other sizes (e.g. " + std::to_string(known_size) +
                       "), so its members cannot be located; not decoded");
  }
  return Unsupported(src + ": gpu_metrics revision " + rev + " (structure_size " +
                     std::to_string(structure_size) + ") is not known to this decoder (known: " +
                     SupportedRevisions() + "); update seqpoint for newer kernels");
}

// The per-partition blocks: gfx_busy_acc[] of each of the `count` xcp_stats elements at
// `offset`, each `element_size` bytes. Read after num_partition (which precedes them).
void DecodeXcpStats(std::span<const uint8_t> bytes, size_t offset, const FieldSpec& f,
                    GpuMetrics& m) {
  const uint32_t busy = XcpGfxBusyAccOffset(f.size);
  if (busy == UINT32_MAX) return;  // cannot happen: every nested size is listed
  const size_t partitions =
      std::min<size_t>({f.count, m.xcp.size(), m.num_partition.value_or(f.count)});
  for (size_t x = 0; x < partitions; ++x) {
    XcpAccumulators& acc = m.xcp[x];
    for (size_t c = 0; c < acc.gfx_busy_acc.size(); ++c) {
      const size_t at = offset + x * f.size + busy + c * 8;
      if (at + 8 > m.structure_size) return;
      const uint64_t raw = ReadLe(bytes.data() + at, 8);
      if (raw == AllOnes(8)) continue;  // XCC slot not in this partition
      acc.gfx_busy_acc[c] = raw;
      acc.present |= static_cast<uint8_t>(1u << c);
    }
  }
  m.xcp_count = static_cast<uint8_t>(partitions);
}

}  // namespace

Result<GpuMetrics> DecodeGpuMetrics(std::span<const uint8_t> bytes, std::string_view source) {
  if (bytes.size() < 4) return HeaderError(source, bytes.size(), 0, 0, 0, 0);
  GpuMetrics m;
  m.structure_size = static_cast<uint16_t>(ReadLe(bytes.data(), 2));
  m.format_revision = bytes[2];
  m.content_revision = bytes[3];
  m.bytes_read = bytes.size();
  uint16_t known_size = 0;
  const LayoutInfo* layout =
      m.structure_size < 4
          ? nullptr
          : FindLayout(m.format_revision, m.content_revision, m.structure_size, &known_size);
  if (layout == nullptr) {
    return HeaderError(source, bytes.size(), m.structure_size, m.format_revision,
                       m.content_revision, known_size);
  }
  if (m.structure_size > bytes.size()) {
    return InvalidArgument(
        std::string(source) + ": gpu_metrics " + Revision(m.format_revision, m.content_revision) +
        " declares " + std::to_string(m.structure_size) + " bytes but only " +
        std::to_string(bytes.size()) + " were read: truncated table, read it again whole");
  }
  m.layout = layout->kernel_struct;
  m.is_apu = m.format_revision >= 2;
  const UnitRules& units = layout->units;
  for (size_t i = 0; i < layout->fields.size(); ++i) {
    const FieldSpec& f = layout->fields[i];
    if (f.id == FieldId::kXcpStats) {
      DecodeXcpStats(bytes, layout->offsets[i], f, m);
      continue;
    }
    if (f.id == FieldId::kSkip || f.id == FieldId::kHeader) continue;
    if (f.id == FieldId::kCurrSocketPower) m.power.socket_is_instantaneous = true;
    if (f.id == FieldId::kEnergyAccumulator) {
      m.energy_counter_bits = 8u * f.size;
      m.energy_joules_per_count = 1.0 / 65536.0;  // 15.259 uJ
    }
    Slot slot = SlotFor(f.id, m);
    InstancesRef& in = slot.instances;
    if (in.count != nullptr)
      *in.count = static_cast<uint8_t>(std::min<size_t>(f.count, in.capacity));
    for (unsigned k = 0; k < f.count; ++k) {
      const size_t at = size_t{layout->offsets[i]} + size_t{k} * f.size;
      if (at + f.size > m.structure_size) break;  // cannot happen: sizes are checked above
      const uint64_t raw = ReadLe(bytes.data() + at, f.size);
      if (raw == AllOnes(f.size)) continue;  // not provided by this ASIC
      if (slot.integer != nullptr) {
        *slot.integer = raw;
      } else if (slot.scalar != nullptr) {
        *slot.scalar = Convert(slot.quantity, raw, units, &m.activity.unit_inferred);
      } else if (in.count != nullptr && k < in.capacity) {
        in.value[k] = Convert(slot.quantity, raw, units, &m.activity.unit_inferred);
        *in.present |= 1u << k;
      }
    }
  }
  return m;
}

}  // namespace seqpoint::firmware
