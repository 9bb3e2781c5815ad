// amdgpu accumulators over a window: on the real captured tables (tests/data/gpu_metrics, RX
// 6900 XT and RX 7600S and MangoHud's, all gpu_metrics_v1_3), and on v1_6 tables built the way
// the kernel builds them (0xFF fill, then members) for what no captured table has
// (accumulation_counter, residency accumulators).
#include "firmware-shim/gpu_metrics/gpu_metrics_window.h"

#include <doctest/doctest.h>

#include <cstring>

#include "firmware-shim/gpu_metrics/gpu_metrics_layout.h"
#include "firmware-shim/test_fixture.h"

namespace seqpoint::firmware {
namespace {

GpuMetrics MustDecode(const std::vector<uint8_t>& bytes) {
  auto m = DecodeGpuMetrics(bytes);
  REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  return *m;
}

void Put(std::vector<uint8_t>& t, size_t offset, unsigned width, uint64_t value) {
  for (unsigned i = 0; i < width; ++i) t.at(offset + i) = static_cast<uint8_t>(value >> (8 * i));
}

bool Has(const GpuMetricsWindow& w, const std::string& text) {
  for (const std::string& s : w.left_out) {
    if (s.find(text) != std::string::npos) return true;
  }
  return false;
}

// The offset of member `name` in the layout of (format, content, size).
size_t Offset(uint8_t format, uint8_t content, uint16_t size, std::string_view name) {
  uint16_t known = 0;
  const LayoutInfo* l = FindLayout(format, content, size, &known);
  REQUIRE(l != nullptr);
  for (size_t i = 0; i < l->fields.size(); ++i) {
    if (name == l->fields[i].name) return l->offsets[i];
  }
  FAIL("no member " << name);
  return 0;
}

}  // namespace

TEST_CASE("gpu_metrics window: real v1_3 tables, energy over the window, activity not provided") {
  // The captured RX 6900 XT table: energy_accumulator 17691682 (x 15.259 uJ), the activity
  // accumulators 0xFFFFFFFF (the driver leaves them unfilled on this ASIC).
  std::vector<uint8_t> first = testing::ReadBlob("amdgpu-sysfs-rs_rx6900xt.bin");
  GpuMetrics a = MustDecode(first);
  CHECK(a.energy_accumulator == 17691682u);
  CHECK_FALSE(a.gfx_activity_acc.has_value());
  CHECK_FALSE(a.mem_activity_acc.has_value());
  CHECK_FALSE(a.throttle.accumulation_counter.has_value());
  // The same GPU 2 s later having used 600 J (300 W): the accumulator advanced by
  // 600 x 2^16 counts, the driver's clock by 2 s.
  std::vector<uint8_t> second = first;
  Put(second, 24, 8, 17691682ull + 600ull * 65536ull);
  Put(second, 32, 8, *a.system_clock_ns + 2'000'000'000ull);
  auto w = WindowOf(a, MustDecode(second));
  REQUIRE(w.ok());
  REQUIRE(w->energy_j.has_value());
  CHECK(*w->energy_j == doctest::Approx(600.0));
  CHECK(w->elapsed_ns == 2e9);
  CHECK_FALSE(w->gfx_activity_pct.has_value());
  CHECK(Has(*w, "gfx_activity: not provided by this ASIC (gpu_metrics_v1_3)"));
  // MangoHud's table against itself: nothing used, exactly.
  GpuMetrics m = MustDecode(testing::ReadBlob("mangohud_gpu_metrics.bin"));
  CHECK(WindowOf(m, m)->energy_j == 0.0);
  // Two GPUs' tables of different revisions (a driver change) are no window.
  GpuMetrics apu = MustDecode(testing::ReadBlob("mangohud_gpu_metrics_apu.bin"));
  CHECK_FALSE(WindowOf(m, apu).ok());
}

TEST_CASE("gpu_metrics window: v1_6 accumulators over accumulation_counter") {
  uint16_t known = 0;
  const LayoutInfo* l = FindLayout(1, 6, 0, &known);
  REQUIRE(known != 0);
  const uint16_t size = known;
  auto table = [&](uint64_t updates, uint64_t gfx, uint64_t mem, uint64_t energy, uint64_t ppt,
                   uint64_t hbm, uint64_t ts) {
    std::vector<uint8_t> t(size, 0xFF);
    Put(t, 0, 2, size);
    t[2] = 1;
    t[3] = 6;
    Put(t, Offset(1, 6, size, "accumulation_counter"), 4, updates);
    Put(t, Offset(1, 6, size, "gfx_activity_acc"), 4, gfx);
    Put(t, Offset(1, 6, size, "mem_activity_acc"), 4, mem);
    Put(t, Offset(1, 6, size, "energy_accumulator"), 8, energy);
    Put(t, Offset(1, 6, size, "ppt_residency_acc"), 4, ppt);
    Put(t, Offset(1, 6, size, "hbm_thm_residency_acc"), 4, hbm);
    Put(t, Offset(1, 6, size, "firmware_timestamp"), 8, ts);
    return MustDecode(t);
  };
  (void)l;
  // 1000 updates in the window: gfx 73.5 % on average, mem 20 %, 250 of them power-capped.
  GpuMetrics a = table(5000, 100000, 7000, 1ull << 30, 40, 0, 1'000'000'000);
  GpuMetrics b = table(6000, 100000 + 73500, 7000 + 20000, (1ull << 30) + 350ull * 65536ull,
                       40 + 250, 0, 1'100'000'000);
  auto w = WindowOf(a, b);
  REQUIRE(w.ok());
  CHECK(w->updates == 1000u);
  CHECK(*w->gfx_activity_pct == doctest::Approx(73.5));
  CHECK(*w->mem_activity_pct == doctest::Approx(20.0));
  CHECK(*w->ppt_fraction == doctest::Approx(0.25));
  CHECK(*w->hbm_thermal_fraction == 0.0);
  CHECK(*w->energy_j == doctest::Approx(350.0));
  CHECK(*w->elapsed_ns == doctest::Approx(1e9));  // 1e8 x 10 ns
  // A counter that went back (GPU reset): what depends on it is left out, not negative.
  auto reset = WindowOf(b, a);
  REQUIRE(reset.ok());
  CHECK_FALSE(reset->gfx_activity_pct.has_value());
  CHECK(Has(*reset, "accumulation_counter: the accumulator went back"));
  CHECK(Has(*reset, "energy: the 64-bit accumulator went back"));
  // No update between the tables: no mean.
  auto same = WindowOf(a, a);
  CHECK(Has(*same, "no PMFW metrics update in the window"));
}

TEST_CASE("gpu_metrics window: per-partition (XCP) gfx busy and per-link XGMI data, v1_8") {
  // An MI300X in DPX mode as smu_v13_0_6 fills gpu_metrics_v1_8: 2 partitions of 4 XCCs each,
  // 7 XGMI links populated and the 8th left 0xFF; every other member 0xFF.
  uint16_t size = 0;
  REQUIRE(FindLayout(1, 8, 0, &size) == nullptr);
  REQUIRE(size != 0);
  const size_t xcp = Offset(1, 8, size, "xcp_stats");
  const uint32_t element = 440, busy = XcpGfxBusyAccOffset(element);
  REQUIRE(busy == 120);
  auto table = [&](uint64_t updates, uint64_t busy0, uint64_t busy1, uint64_t kb) {
    std::vector<uint8_t> t(size, 0xFF);
    Put(t, 0, 2, size);
    t[2] = 1;
    t[3] = 8;
    Put(t, Offset(1, 8, size, "accumulation_counter"), 4, updates);
    Put(t, Offset(1, 8, size, "num_partition"), 2, 2);
    for (unsigned c = 0; c < 4; ++c) {  // XCC c busy (c + 1) x the partition's base
      Put(t, xcp + busy + 8 * c, 8, busy0 * (c + 1));
      Put(t, xcp + element + busy + 8 * c, 8, busy1 * (c + 1));
    }
    for (unsigned l = 0; l < 7; ++l) {
      Put(t, Offset(1, 8, size, "xgmi_read_data_acc") + 8 * l, 8, kb * (l + 1));
      Put(t, Offset(1, 8, size, "xgmi_write_data_acc") + 8 * l, 8, 2 * kb * (l + 1));
    }
    return MustDecode(t);
  };
  GpuMetrics a = table(1000, 10'000, 20'000, 1'000'000);
  CHECK(a.num_partition == 2u);
  REQUIRE(a.xcp_count == 2);
  CHECK(a.xcp[0].present == 0x0F);
  CHECK(a.xcp[1].gfx_busy_acc[3] == 80'000);
  CHECK(a.xgmi_read_kb.at(6) == doctest::Approx(7e6));
  CHECK_FALSE(a.xgmi_read_kb.at(7).has_value());
  // 500 PMFW updates later.
  GpuMetrics b = table(1500, 10'000 + 5'000, 20'000 + 15'000, 1'000'000 + 4096);
  auto w = WindowOf(a, b);
  REQUIRE_MESSAGE(w.ok(), w.status().ToString());
  REQUIRE(w->xcp_gfx_busy_pct.size() == 2);
  // XCC c of partition 0 gained 5000 (c + 1) over 500 updates: 10 (c + 1) %, mean 25 %.
  CHECK(*w->xcp_gfx_busy_pct[0] == doctest::Approx(25.0));
  // Partition 1: 15000 (c + 1) / 500 = 30 (c + 1) %, mean 75 %.
  CHECK(*w->xcp_gfx_busy_pct[1] == doctest::Approx(75.0));
  REQUIRE(w->xgmi_read_kb.size() == 8);
  CHECK(*w->xgmi_read_kb[0] == doctest::Approx(4096.0));
  CHECK(*w->xgmi_read_kb[6] == doctest::Approx(7 * 4096.0));
  CHECK(*w->xgmi_write_kb[2] == doctest::Approx(2 * 3 * 4096.0));
  CHECK_FALSE(w->xgmi_read_kb[7].has_value());  // the link the ASIC leaves unfilled
  // A reset in the window: each partition and link is left out and named, never negative.
  auto back = WindowOf(b, a);
  REQUIRE(back.ok());
  CHECK(back->xcp_gfx_busy_pct.empty());  // no update count once the counter went back
  CHECK(Has(*back, "xcp gfx_busy: no PMFW update count"));
  CHECK_FALSE(back->xgmi_read_kb[0].has_value());
  CHECK(Has(*back, "xgmi_read link 0: the accumulator went back"));
}

TEST_CASE("gpu_metrics window: the real captured tables have no partitions and no XGMI") {
  // Every captured table is gpu_metrics_v1_3 (RX 6900 XT, RX 7600S, MangoHud's dGPU) or an APU
  // table: neither member exists there, so the window has none (absent, not zero).
  for (const char* name : {"amdgpu-sysfs-rs_rx6900xt.bin", "amdgpu-sysfs-rs_rx7600s.bin",
                           "mangohud_gpu_metrics.bin"}) {
    INFO(name);
    const GpuMetrics m = MustDecode(testing::ReadBlob(name));
    CHECK(m.xcp_count == 0);
    CHECK_FALSE(m.num_partition.has_value());
    CHECK_FALSE(m.xgmi_read_kb.any());
    auto w = WindowOf(m, m);
    REQUIRE(w.ok());
    CHECK(w->xcp_gfx_busy_pct.empty());
    CHECK(w->xgmi_read_kb.empty());
  }
}

}  // namespace seqpoint::firmware
