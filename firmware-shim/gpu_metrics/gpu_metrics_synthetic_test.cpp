// Revisions no captured table covers (v1_0..v1_2, v1_4..v1_8, v2_0, v2_1, v2_3, v2_4, v3_0):
// tables built the way the kernel builds them (smu_cmn_init_soft_gpu_metrics fills the struct
// with 0xFF, then the driver writes members) with members placed at offsets worked out by hand
// from kgd_pp_interface.h, independently of gpu_metrics_layouts.cpp.
#include <doctest/doctest.h>

#include <functional>

#include "firmware-shim/gpu_metrics/gpu_metrics.h"
#include "firmware-shim/gpu_metrics/gpu_metrics_layout.h"

namespace seqpoint::firmware {
namespace {

std::vector<uint8_t> KernelTable(uint8_t format, uint8_t content, uint16_t size) {
  std::vector<uint8_t> t(size, 0xFF);
  t[0] = static_cast<uint8_t>(size & 0xFF);
  t[1] = static_cast<uint8_t>(size >> 8);
  t[2] = format;
  t[3] = content;
  return t;
}

void Put(std::vector<uint8_t>& t, size_t offset, unsigned width, uint64_t value) {
  for (unsigned i = 0; i < width; ++i) t.at(offset + i) = static_cast<uint8_t>(value >> (8 * i));
}

struct Member {
  size_t offset;
  unsigned width;
  uint64_t raw;
};

struct Case {
  uint8_t format, content;
  uint16_t size;
  std::vector<Member> members;
  std::function<void(const GpuMetrics&)> check;
};

TEST_CASE("every layout: a table the driver left unfilled decodes to absent values") {
  for (const LayoutInfo& l : AllLayouts()) {
    CAPTURE(l.kernel_struct);
    auto m = DecodeGpuMetrics(KernelTable(l.format_revision, l.content_revision, l.structure_size));
    REQUIRE_MESSAGE(m.ok(), m.status().ToString());
    CHECK(m->structure_size == l.structure_size);
    CHECK_FALSE(m->temperature.edge.has_value());
    CHECK_FALSE(m->temperature.hotspot.has_value());
    CHECK_FALSE(m->temperature.gfx.has_value());
    CHECK_FALSE(m->temperature.core.any());
    CHECK_FALSE(m->activity.gfx.has_value());
    CHECK_FALSE(m->power.socket.has_value());
    CHECK_FALSE(m->power.core.any());
    CHECK_FALSE(m->energy_accumulator.has_value());
    CHECK_FALSE(m->clock.gfx.any());
    CHECK_FALSE(m->clock.uclk.has_value());
    CHECK_FALSE(m->throttle.status.has_value());
    CHECK_FALSE(m->throttle.indep_status.has_value());
    CHECK_FALSE(m->pcie_link_width.has_value());
    CHECK_FALSE(m->system_clock_ns.has_value());
    // Every member lies inside the struct.
    for (size_t i = 0; i < l.fields.size(); ++i) {
      CHECK(l.offsets[i] + size_t{l.fields[i].size} * l.fields[i].count <= l.structure_size);
    }
  }
}

TEST_CASE("every revision: members found at the kernel's offsets, in the kernel's units") {
  const std::vector<Case> cases = {
      {1,
       0,
       80,
       {{8, 8, 777}, {34, 2, 250}, {36, 4, 0x10000}, {54, 2, 1900}, {74, 1, 16}, {75, 1, 160}},
       [](const GpuMetrics& m) {
         CHECK(m.system_clock_ns == uint64_t{777});
         CHECK(m.power.socket == 250.0);
         CHECK(m.energy_counter_bits == 32);
         CHECK(*m.energy_joules() == doctest::Approx(1.0));
         CHECK(m.clock.gfx.at(0) == 1900.0);
         CHECK(m.pcie_link_width == 16.0);
         CHECK(m.pcie_link_speed_gts == 16.0);
       }},
      {1,
       1,
       96,
       {{88, 2, 70}, {94, 2, 73}, {68, 4, 0x5}},
       [](const GpuMetrics& m) {
         CHECK(m.temperature.hbm.count == 4);
         CHECK(m.temperature.hbm.at(0) == 70.0);
         CHECK(m.temperature.hbm.at(3) == 73.0);
         CHECK(m.throttle.status == uint64_t{5});
       }},
      {1,
       2,
       104,
       {{96, 8, 12345}},
       [](const GpuMetrics& m) { CHECK(m.firmware_timestamp_10ns == uint64_t{12345}); }},
      {1,
       4,
       288,
       {{10, 2, 550},
        {24, 8, 65536 * 3},
        {40, 4, 9},
        {240, 2, 2100},
        {254, 2, 2000},
        {280, 2, 1300},
        {16, 2, 42}},
       [](const GpuMetrics& m) {
         CHECK(m.power.socket == 550.0);
         CHECK(m.power.socket_is_instantaneous);
         CHECK(*m.energy_joules() == doctest::Approx(3.0));
         CHECK(m.throttle.status == uint64_t{9});
         CHECK(m.clock.gfx.count == 8);
         CHECK(m.clock.gfx.at(0) == 2100.0);
         CHECK(m.clock.gfx.at(7) == 2000.0);
         CHECK(m.clock.uclk == 1300.0);
         CHECK(m.activity.vcn.at(0) == 42.0);
       }},
      {1,
       5,
       360,
       {{88, 8, 65536}, {312, 2, 1500}, {352, 2, 900}, {104, 4, 1}},
       [](const GpuMetrics& m) {
         CHECK(*m.energy_joules() == doctest::Approx(1.0));
         CHECK(m.clock.gfx.at(0) == 1500.0);
         CHECK(m.clock.uclk == 900.0);
         CHECK(m.throttle.status == uint64_t{1});
       }},
      {1,
       6,
       384,
       {{88, 8, 65536}, {104, 4, 1000}, {112, 4, 250}, {128, 4, 3}, {336, 2, 2100}},
       [](const GpuMetrics& m) {
         CHECK(*m.energy_joules() == doctest::Approx(1.0));
         CHECK(m.throttle.accumulation_counter == uint64_t{1000});
         CHECK(m.throttle.ppt_acc == uint64_t{250});
         CHECK(m.throttle.status == uint64_t{3});
         CHECK(m.clock.gfx.at(0) == 2100.0);
       }},
      {1,
       6,
       1664,
       {{4, 2, 42},
        {16, 8, 65536 * 2},
        {32, 4, 10657785},
        {40, 4, 1},
        {264, 2, 160},
        {304, 2, 1300}},
       [](const GpuMetrics& m) {
         CHECK(m.temperature.hotspot == 42.0);
         CHECK(*m.energy_joules() == doctest::Approx(2.0));
         CHECK(m.throttle.accumulation_counter == uint64_t{10657785});
         CHECK(m.throttle.ppt_acc == uint64_t{1});
         CHECK(m.clock.gfx.at(0) == 160.0);
         CHECK(m.clock.uclk == 1300.0);
         CHECK_FALSE(m.throttle.status.has_value());  // v1_6 has residencies instead
       }},
      {1,
       7,
       2208,
       {{24, 8, 65536}, {40, 4, 5008}, {48, 4, 4342}, {296, 2, 1304}, {336, 2, 1000}},
       [](const GpuMetrics& m) {
         CHECK(*m.energy_joules() == doctest::Approx(1.0));
         CHECK(m.throttle.accumulation_counter == uint64_t{5008});
         CHECK(m.throttle.ppt_acc == uint64_t{4342});
         CHECK(m.clock.gfx.at(0) == 1304.0);
         CHECK(m.clock.uclk == 1000.0);
       }},
      {1,
       8,
       3872,
       {{10, 2, 705}, {24, 8, 65536}, {296, 2, 1292}, {336, 2, 1100}},
       [](const GpuMetrics& m) {
         CHECK(m.power.socket == 705.0);
         CHECK(*m.energy_joules() == doctest::Approx(1.0));
         CHECK(m.clock.gfx.at(0) == 1292.0);
         CHECK(m.clock.uclk == 1100.0);
       }},
      {2,
       0,
       120,
       {{8, 8, 99}, {16, 2, 4500}, {40, 2, 5000}, {50, 2, 5000}, {80, 2, 800}, {112, 4, 6}},
       [](const GpuMetrics& m) {
         CHECK(m.system_clock_ns == uint64_t{99});
         CHECK(m.temperature.gfx == doctest::Approx(45.0));
         CHECK(m.activity.gfx == doctest::Approx(50.0));  // > 100: centi-percent
         CHECK(m.activity.unit_inferred);
         CHECK(m.power.gfx == doctest::Approx(5.0));
         CHECK(m.clock.gfx.at(0) == 800.0);
         CHECK(m.throttle.status == uint64_t{6});
       }},
      {2,
       1,
       120,
       {{46, 2, 4000}, {76, 2, 1600}, {112, 2, 30}},
       [](const GpuMetrics& m) {
         CHECK(m.power.gfx == doctest::Approx(4.0));
         CHECK(m.clock.gfx.at(0) == 1600.0);
         CHECK(m.fan_pwm == 30.0);
       }},
      {2,
       3,
       152,
       {{120, 8, 1ull << 36}},
       [](const GpuMetrics& m) {
         REQUIRE(m.throttle.indep_status.has_value());
         CHECK(IsThermalThrottled(*m.throttle.indep_status));
       }},
      {2,
       4,
       168,
       {{28, 2, 5000}, {40, 2, 15000}, {152, 2, 1100}, {162, 2, 3000}},
       [](const GpuMetrics& m) {
         CHECK(m.activity.gfx == doctest::Approx(50.0));  // v2_4 states centi
         CHECK_FALSE(m.activity.unit_inferred);
         CHECK(m.power.socket == doctest::Approx(15.0));
         CHECK(m.voltage_cpu_v == doctest::Approx(1.1));
         CHECK(m.current_gfx_a == doctest::Approx(3.0));
       }},
      {3,
       0,
       224,
       {{112, 4, 25000}, {184, 2, 4000}, {42, 2, 37}},
       [](const GpuMetrics& m) {
         CHECK(m.power.socket == doctest::Approx(25.0));
         CHECK(m.clock.core.count == 16);
         CHECK(m.clock.core.at(0) == 4000.0);
         CHECK(m.activity.gfx == doctest::Approx(37.0));
       }},
      {3,
       0,
       264,
       {{40, 2, 3850},
        {112, 4, 25000},
        {120, 4, 20000},
        {168, 2, 30000},
        {186, 2, 800},
        {190, 2, 4200},
        {228, 4, 7}},
       [](const GpuMetrics& m) {
         CHECK(m.temperature.skin == doctest::Approx(38.5));
         CHECK(m.power.socket == doctest::Approx(25.0));
         CHECK(m.power.apu == doctest::Approx(20.0));
         CHECK(m.power.system == doctest::Approx(30.0));
         CHECK(m.clock.avg_uclk == 800.0);
         CHECK(m.clock.core.at(0) == 4200.0);
         CHECK(m.throttle.prochot == uint64_t{7});
       }},
  };
  for (const Case& c : cases) {
    CAPTURE(int(c.format));
    CAPTURE(int(c.content));
    CAPTURE(c.size);
    auto t = KernelTable(c.format, c.content, c.size);
    for (const Member& mem : c.members) Put(t, mem.offset, mem.width, mem.raw);
    auto m = DecodeGpuMetrics(t);
    REQUIRE_MESSAGE(m.ok(), m.status().ToString());
    c.check(*m);
  }
}

TEST_CASE("layouts: every kernel revision is known, each (revision, size) once") {
  CHECK(SupportedRevisions() == "1.0 1.1 1.2 1.3 1.4 1.5 1.6 1.7 1.8 2.0 2.1 2.2 2.3 2.4 3.0");
  const auto layouts = AllLayouts();
  for (size_t i = 0; i < layouts.size(); ++i) {
    for (size_t j = i + 1; j < layouts.size(); ++j) {
      const bool same = layouts[i].format_revision == layouts[j].format_revision &&
                        layouts[i].content_revision == layouts[j].content_revision &&
                        layouts[i].structure_size == layouts[j].structure_size;
      CHECK_FALSE(same);
    }
  }
}

TEST_CASE("indep throttle names follow SMU_THROTTLER_*_BIT") {
  CHECK(IndepThrottlerNames(0).empty());
  CHECK(IndepThrottlerNames(1).front() == "ppt0");
  CHECK(IndepThrottlerNames(1ull << 57).front() == "fit");
  CHECK(IndepThrottlerNames(1ull << 10).front() == "bit_10");
  CHECK(IsPowerThrottled(1ull << 5));
  CHECK_FALSE(IsPowerThrottled(1ull << 16));
  CHECK(IsThermalThrottled(1ull << 47));
  CHECK_FALSE(IsThermalThrottled(1ull << 57));
}

}  // namespace
}  // namespace seqpoint::firmware
