// libFuzzer target: the gpu_metrics decoder must accept or reject any bytes without a crash or a
// sanitizer report, and what it accepts must hold its invariants: only structure_size bytes
// used, per-instance counts in range, every number finite and non-negative. The energy
// accumulator is fed the decoded counter and arbitrary tails of the input as later readings.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "firmware-shim/energy_accumulator.h"
#include "firmware-shim/gpu_metrics/gpu_metrics.h"

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

void CheckValue(const std::optional<double>& v) {
  if (v) Require(std::isfinite(*v) && *v >= 0.0);
}

template <typename T>
void CheckInstances(const T& in) {
  Require(in.count <= T::kMax);
  Require((in.present >> in.count) == 0);  // no value beyond the slots the table defines
  for (size_t i = 0; i < in.count; ++i) CheckValue(in.at(i));
}

uint64_t Le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = seqpoint::firmware::DecodeGpuMetrics({data, size}, "fuzz");
  if (!m.ok()) {
    Require(!m.status().message().empty());
    return 0;
  }
  Require(m->structure_size <= size && m->bytes_read == size);
  const auto& t = m->temperature;
  for (const auto& v :
       {t.edge, t.hotspot, t.mem, t.vr_gfx, t.vr_soc, t.vr_mem, t.gfx, t.soc, t.skin}) {
    CheckValue(v);
  }
  CheckInstances(t.hbm);
  CheckInstances(t.core);
  CheckInstances(t.l3);
  CheckValue(m->activity.gfx);
  CheckValue(m->power.socket);
  CheckInstances(m->power.core);
  CheckInstances(m->clock.gfx);
  CheckInstances(m->clock.core);
  CheckValue(m->voltage_gfx_v);
  CheckValue(m->pcie_link_speed_gts);
  if (m->throttle.indep_status) {
    (void)seqpoint::firmware::IndepThrottlerNames(*m->throttle.indep_status);
  }
  if (m->energy_accumulator) {
    Require(m->energy_counter_bits == 32 || m->energy_counter_bits == 64);
    seqpoint::firmware::EnergyAccumulator acc(m->energy_counter_bits, m->energy_joules_per_count);
    acc.Add(*m->energy_accumulator);
    double last = acc.total_joules();
    for (size_t off = m->structure_size; off + 8 <= size && off < m->structure_size + 64;
         off += 8) {
      acc.Add(Le64(data + off));
      Require(std::isfinite(acc.total_joules()) && acc.total_joules() >= last);
      last = acc.total_joules();
    }
  }
  return 0;
}
