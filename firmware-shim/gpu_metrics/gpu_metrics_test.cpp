// Golden tests on the real captured tables of tests/data/gpu_metrics: every value its README
// lists, plus the bad-input cases synthesized from those same captures (truncated, oversized,
// unknown revision).
#include "firmware-shim/gpu_metrics/gpu_metrics.h"

#include <doctest/doctest.h>

#include "firmware-shim/test_fixture.h"

namespace seqpoint::firmware {
namespace {

using testing::ReadBlob;

GpuMetrics MustDecode(const std::vector<uint8_t>& bytes) {
  auto m = DecodeGpuMetrics(bytes, "test blob");
  REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  return *m;
}

TEST_CASE("golden: MangoHud v1.3 discrete table decodes to its README values") {
  const GpuMetrics m = MustDecode(ReadBlob("mangohud_gpu_metrics.bin"));
  CHECK(m.structure_size == 120);
  CHECK(m.format_revision == 1);
  CHECK(m.content_revision == 3);
  CHECK(std::string(m.layout) == "gpu_metrics_v1_3");
  CHECK_FALSE(m.is_apu);
  CHECK(m.activity.gfx == 64.0);  // GFX activity 64 %
  CHECK(m.power.socket == 33.0);  // average socket power 33 W
  CHECK_FALSE(m.power.socket_is_instantaneous);
  CHECK(m.clock.gfx.count == 1);
  CHECK(m.clock.gfx.at(0) == 2165.0);  // current gfxclk 2165 MHz
  CHECK(m.clock.uclk == 1000.0);       // current uclk 1000 MHz
  CHECK(m.temperature.edge == 36.0);   // edge temperature 36 C
  REQUIRE(m.throttle.indep_status.has_value());
  CHECK(*m.throttle.indep_status == 0);  // no throttling
  CHECK(m.throttle.status == uint64_t{0});
  CHECK(IndepThrottlerNames(*m.throttle.indep_status).empty());
  // Members the README does not list, read off the capture by hand.
  CHECK(m.temperature.hotspot == 49.0);
  CHECK(m.temperature.mem == 36.0);
  CHECK(m.activity.umc == 6.0);
  CHECK(m.clock.avg_gfx == 2173.0);
  CHECK_FALSE(m.clock.avg_soc.has_value());  // 0xFFFF: not provided
  CHECK(m.clock.soc.at(0) == 800.0);
  CHECK(m.pcie_link_width == 8.0);
  CHECK(m.pcie_link_speed_gts == 8.0);
  CHECK(m.voltage_gfx_v == doctest::Approx(1.025));
  CHECK_FALSE(m.temperature.hbm.any());
  CHECK_FALSE(m.firmware_timestamp_10ns.has_value());
  REQUIRE(m.energy_accumulator.has_value());
  CHECK(*m.energy_accumulator == 0xC3BE881Eull);
  CHECK(m.energy_counter_bits == 64);
  CHECK(*m.energy_joules() == doctest::Approx(3284043806.0 / 65536.0));
}

TEST_CASE("golden: MangoHud v2.2 APU table decodes to its README values") {
  const GpuMetrics m = MustDecode(ReadBlob("mangohud_gpu_metrics_apu.bin"));
  CHECK(m.structure_size == 128);
  CHECK(m.format_revision == 2);
  CHECK(m.content_revision == 2);
  CHECK(m.is_apu);
  CHECK(m.activity.gfx == 100.0);                // GFX activity 100 %
  CHECK(m.activity.unit_inferred);               // v2.2 does not fix the unit
  CHECK(m.power.gfx == doctest::Approx(6.161));  // average gfx power 6.161 W
  CHECK(m.power.cpu == doctest::Approx(9.235));  // average CPU power 9.235 W
  CHECK(m.clock.gfx.at(0) == 1040.0);            // current gfxclk 1040 MHz
  CHECK(m.clock.uclk == 687.0);                  // current uclk 687 MHz
  // The table holds centi-degrees: 8175 -> 81.75 C (README: 81 C, whole degrees).
  REQUIRE(m.temperature.gfx.has_value());
  CHECK(*m.temperature.gfx == doctest::Approx(81.75));
  CHECK(static_cast<int>(*m.temperature.gfx) == 81);
  CHECK(m.temperature.soc == doctest::Approx(71.0));  // SoC temperature 71 C
  CHECK(m.temperature.core.count == 8);
  REQUIRE(m.temperature.core.max().has_value());
  CHECK(*m.temperature.core.max() == doctest::Approx(80.5));  // hottest core 80 C
  CHECK(static_cast<int>(*m.temperature.core.max()) == 80);
  CHECK(m.temperature.core.at(3) == doctest::Approx(73.5));
  CHECK_FALSE(m.temperature.core.at(4).has_value());  // 4-core part: slots 4..7 absent
  REQUIRE(m.throttle.indep_status.has_value());
  CHECK(IsPowerThrottled(*m.throttle.indep_status));  // power-throttled
  CHECK_FALSE(IsThermalThrottled(*m.throttle.indep_status));
  CHECK(IndepThrottlerNames(*m.throttle.indep_status) == std::vector<std::string>{"fppt", "sppt"});
  CHECK(m.power.socket == doctest::Approx(18.844));
  CHECK(m.power.soc == doctest::Approx(1.083));
  CHECK(m.clock.core.at(0) == 3475.0);
  CHECK_FALSE(m.fan_pwm.has_value());
  CHECK_FALSE(m.energy_accumulator.has_value());  // APUs carry no energy accumulator
}

TEST_CASE("golden: the invalid MangoHud capture is rejected with a clear status") {
  auto m = DecodeGpuMetrics(ReadBlob("mangohud_gpu_metrics_invalid.bin"), "invalid.bin");
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == ErrorCode::kInvalidArgument);
  CHECK(m.status().message().find("invalid.bin") != std::string::npos);
  CHECK(m.status().message().find("structure_size 0") != std::string::npos);
}

TEST_CASE("golden: RX 7600S v1.3 table decodes per gpu_metrics_v1_3") {
  const GpuMetrics m = MustDecode(ReadBlob("amdgpu-sysfs-rs_rx7600s.bin"));
  CHECK(m.temperature.edge == 53.0);
  CHECK(m.temperature.hotspot == 54.0);
  CHECK(m.temperature.mem == 60.0);
  CHECK(m.power.socket == 1.0);
  CHECK(m.clock.gfx.at(0) == 1200.0);
  CHECK(m.clock.soc.at(0) == 711.0);
  CHECK(m.clock.uclk == 96.0);
  CHECK(m.throttle.status == uint64_t{2});
  REQUIRE(m.throttle.indep_status.has_value());
  CHECK(IndepThrottlerNames(*m.throttle.indep_status) == std::vector<std::string>{"temp_hotspot"});
  CHECK(m.pcie_link_width == 8.0);
  CHECK(m.pcie_link_speed_gts == 16.0);
  CHECK(m.voltage_soc_v == doctest::Approx(0.727));
  CHECK(m.voltage_gfx_v == 0.0);
  CHECK(m.energy_accumulator == uint64_t{0});
}

TEST_CASE("golden: a 4096-byte read of a 120-byte table trusts structure_size") {
  const auto bytes = ReadBlob("amdgpu-sysfs-rs_rx6900xt.bin");
  REQUIRE(bytes.size() == 4096);
  const GpuMetrics m = MustDecode(bytes);
  CHECK(m.bytes_read == 4096);
  CHECK(m.structure_size == 120);
  CHECK(m.temperature.edge == 56.0);
  CHECK(m.temperature.hotspot == 59.0);
  CHECK(m.power.socket == 36.0);
  CHECK(m.activity.gfx == 3.0);
  CHECK(m.clock.gfx.at(0) == 500.0);
  CHECK(m.clock.uclk == 1000.0);
  CHECK(m.pcie_link_width == 16.0);
  CHECK(m.pcie_link_speed_gts == 16.0);
  CHECK(m.throttle.indep_status == uint64_t{0});
}

TEST_CASE("bad input: truncated copies of a real table are errors, never numbers") {
  const auto full = ReadBlob("mangohud_gpu_metrics.bin");
  for (size_t len : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{60}, size_t{119}}) {
    CAPTURE(len);
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(len));
    auto m = DecodeGpuMetrics(cut, "cut");
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("bad input: extra bytes after structure_size are ignored") {
  auto bytes = ReadBlob("mangohud_gpu_metrics.bin");
  bytes.resize(8192, 0xA5);
  const GpuMetrics m = MustDecode(bytes);
  CHECK(m.bytes_read == 8192);
  CHECK(m.power.socket == 33.0);
  CHECK(m.throttle.indep_status == uint64_t{0});
}

TEST_CASE("bad input: a structure_size the kernel never emitted for the revision") {
  auto bytes = ReadBlob("mangohud_gpu_metrics.bin");
  bytes.resize(4096, 0);
  for (uint16_t size : {uint16_t{121}, uint16_t{128}, uint16_t{4000}, uint16_t{5}}) {
    CAPTURE(size);
    bytes[0] = static_cast<uint8_t>(size & 0xFF);
    bytes[1] = static_cast<uint8_t>(size >> 8);
    auto m = DecodeGpuMetrics(bytes, "resized");
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == ErrorCode::kUnsupported);
    CHECK(m.status().message().find("120") != std::string::npos);  // names the known size
  }
  // Larger than what was read: truncated, whatever the revision.
  auto small = ReadBlob("mangohud_gpu_metrics.bin");
  small[0] = 0x20;  // 288 = gpu_metrics_v1_4
  small[1] = 0x01;
  small[3] = 4;
  auto m = DecodeGpuMetrics(small, "short v1.4");
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("bad input: unknown format or content revisions are unsupported") {
  for (auto [format, content] : {std::pair{1, 9}, std::pair{1, 200}, std::pair{2, 5},
                                 std::pair{3, 1}, std::pair{4, 0}, std::pair{0, 0}}) {
    CAPTURE(format);
    CAPTURE(content);
    auto bytes = ReadBlob("mangohud_gpu_metrics.bin");
    bytes[2] = static_cast<uint8_t>(format);
    bytes[3] = static_cast<uint8_t>(content);
    auto m = DecodeGpuMetrics(bytes, "future");
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == ErrorCode::kUnsupported);
    CHECK(m.status().message().find("update seqpoint") != std::string::npos);
  }
}

}  // namespace
}  // namespace seqpoint::firmware
