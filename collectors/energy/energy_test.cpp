// Energy: RAPL against a fixture of real powercap values (prometheus/procfs test data, an
// Intel package near its counter's wrap), the gpu_metrics source against a real RX 6900 XT
// table through the firmware-shim, NVML through its test double, and the choice of source.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "collectors/collectors_test_util.h"
#include "collectors/energy/energy_collector.h"
#include "collectors/energy/gpu_metrics_energy.h"
#include "collectors/energy/rapl.h"
#include "collectors/registry.h"
#include "firmware-shim/gpu_metrics/gpu_metrics.h"

namespace seqpoint::collectors {
namespace {

std::string PowercapFixture() {
  return testing::SourceDir() + "/collectors/energy/testdata/powercap/class";
}
std::string GpuMetricsBlob() {
  return testing::SourceDir() + "/tests/data/gpu_metrics/amdgpu-sysfs-rs_rx6900xt.bin";
}

// A scratch root "<dir>/sys" holding what each case asks for.
struct Node {
  testing::ScratchDir dir;
  std::string sys = dir.path() + "/sys";
  void AddPowercap() const { testing::CopyTree(PowercapFixture(), sys + "/class"); }
  void AddAmdGpu() const {
    dir.Mkdir("sys/class/drm/card0/device");
    std::ifstream in(GpuMetricsBlob(), std::ios::binary);
    std::string blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    dir.Write("sys/class/drm/card0/device/gpu_metrics", blob);
  }
  void SetRapl(uint64_t uj) const {
    dir.Write("sys/class/powercap/intel-rapl:0/energy_uj", std::to_string(uj) + "\n");
  }
  // energy_accumulator of the v1_3 table sits at byte 24 (kgd_pp_interface.h).
  void AddGpuCounts(uint64_t counts) const {
    std::fstream f(sys + "/class/drm/card0/device/gpu_metrics",
                   std::ios::binary | std::ios::in | std::ios::out);
    uint64_t v = 0;
    f.seekg(24);
    f.read(reinterpret_cast<char*>(&v), sizeof v);
    v += counts;
    f.seekp(24);
    f.write(reinterpret_cast<const char*>(&v), sizeof v);
  }
};

CollectorConfig ConfigFor(const Node& node) {
  CollectorConfig c;
  c.sysfs_root = node.sys;
  c.nvml.library = "/nonexistent/libnvidia-ml.so.1";
  return c;
}

constexpr uint64_t kRaplMax = 262143328850;  // max_energy_range_uj of the fixture
constexpr uint64_t kRaplStart = 240422366267;

}  // namespace

TEST_CASE("rapl: zones of a real powercap tree, packages and dram make the node total") {
  Node node;
  node.AddPowercap();
  auto zones = DiscoverRaplZones(FileRoot(node.sys));
  REQUIRE(zones.ok());
  REQUIRE(zones->size() == 2);
  CHECK((*zones)[0].name == "package-0");
  CHECK((*zones)[0].in_node_total);
  CHECK((*zones)[0].max_range_uj == kRaplMax);
  CHECK((*zones)[1].name == "package-0/core");
  CHECK(!(*zones)[1].in_node_total);  // part of the package: never added twice
}

TEST_CASE("rapl: a counter wrap between Begin and End gives the true delta") {
  Node node;
  node.AddPowercap();
  RaplEnergySource src(node.sys);
  REQUIRE(src.Open().ok());
  auto a = src.ReadMicrojoules();
  node.SetRapl(kRaplStart + 5'000'000);
  auto b = src.ReadMicrojoules();
  node.SetRapl(1'000);  // wrapped past max_energy_range_uj
  auto c = src.ReadMicrojoules();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  CHECK(*b - *a == 5'000'000);
  CHECK(*c - *b == double((kRaplMax - (kRaplStart + 5'000'000)) + 1'000 + 1));

  RaplCollector rapl(node.sys);
  REQUIRE(rapl.Open({0, ""}).ok());
  REQUIRE(rapl.Begin().ok());
  node.SetRapl(3'000);
  auto s = rapl.End();
  REQUIRE(s.ok());
  REQUIRE(s->size() == 2);
  CHECK((*s)[0].name == "rapl:package-0");
  CHECK((*s)[0].value == 2'000);
  CHECK((*s)[1].value == 0);  // the core sub-zone did not move in the fixture
}

TEST_CASE("rapl: absent in this VM or a missing file is a clear status, never a number") {
  testing::ScratchDir empty;
  RaplEnergySource none(empty.path());
  Status s = none.Open();
  CHECK(s.code() == ErrorCode::kNotFound);
  CHECK(s.message().find("class/powercap") != std::string::npos);

  Node node;
  node.AddPowercap();
  RaplCollector rapl(node.sys);
  REQUIRE(rapl.Open({0, ""}).ok());
  REQUIRE(rapl.Begin().ok());
  std::filesystem::remove(node.sys + "/class/powercap/intel-rapl:0/energy_uj");
  auto r = rapl.End();
  REQUIRE(r.ok());  // the core zone still answers
  CHECK(r->size() == 1);
  CHECK(rapl.warnings().find("package-0: ") != std::string::npos);
  CHECK(rapl.warnings().find("energy_uj: open failed") != std::string::npos);
}

TEST_CASE("gpu_metrics energy: the RX 6900 XT's accumulator through the firmware-shim") {
  Node node;
  node.AddAmdGpu();
  GpuMetricsEnergySource src(node.sys);
  REQUIRE(src.Open().ok());
  CHECK(src.Describe() == "gpu_metrics energy accumulator (card0 gpu_metrics_v1_3)");
  auto a = src.ReadMicrojoules();
  node.AddGpuCounts(1000);
  auto b = src.ReadMicrojoules();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::ifstream in(GpuMetricsBlob(), std::ios::binary);
  std::vector<uint8_t> blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto m = firmware::DecodeGpuMetrics(blob);
  REQUIRE(m.ok());
  CHECK(*b - *a == doctest::Approx(1000 * m->energy_joules_per_count * 1e6));

  std::filesystem::remove(node.sys + "/class/drm/card0/device/gpu_metrics");  // GPU gone
  CHECK(!src.ReadMicrojoules().ok());
}

TEST_CASE("energy: the best source present is chosen, in the configured order") {
  Node node;
  node.AddPowercap();
  CollectorConfig c = ConfigFor(node);
  {
    EnergyCollector e(c, EnergySourceRegistry());
    REQUIRE(e.Open({0, ""}).ok());
    CHECK(e.source_name() == "rapl");
    CHECK(e.Describe().find("skipped gpu_metrics: ") != std::string::npos);
    CHECK(e.Describe().find("nvml: NVML not present") != std::string::npos);
    REQUIRE(e.Begin().ok());
    node.SetRapl(kRaplStart + 123);
    auto s = e.End();
    REQUIRE(s.ok());
    REQUIRE(s->size() == 1);
    CHECK((*s)[0].name == "energy_uj");
    CHECK((*s)[0].value == 123);
  }
  c.nvml.library = SEQPOINT_FAKE_NVML_PATH;
  {
    EnergyCollector e(c, EnergySourceRegistry());
    REQUIRE(e.Open({0, ""}).ok());
    CHECK(e.source_name() == "nvml");  // NVML ranks above RAPL
  }
  node.AddAmdGpu();
  {
    EnergyCollector e(c, EnergySourceRegistry());
    REQUIRE(e.Open({0, ""}).ok());
    CHECK(e.source_name() == "gpu_metrics");
    REQUIRE(e.Begin().ok());
    node.AddGpuCounts(10);
    auto s = e.End();
    REQUIRE(s.ok());
    CHECK((*s)[0].value > 0);
  }
  c.energy.sources = {"rapl", "gpu_metrics"};
  {
    EnergyCollector e(c, EnergySourceRegistry());
    REQUIRE(e.Open({0, ""}).ok());
    CHECK(e.source_name() == "rapl");
  }
}

TEST_CASE("energy: no source present is 'absent' with every reason, a failed read voids") {
  testing::ScratchDir empty;
  CollectorConfig c;
  c.sysfs_root = empty.path() + "/sys";
  c.nvml.library = "/nonexistent/libnvidia-ml.so.1";
  EnergyCollector e(c, EnergySourceRegistry());
  Status s = e.Open({0, ""});
  CHECK(IsAbsent(s));
  for (const char* name : {"gpu_metrics: ", "rocm_smi: ", "nvml: ", "rapl: "}) {
    CHECK(s.message().find(name) != std::string::npos);
  }

  Node node;
  node.AddPowercap();
  EnergyCollector rapl(ConfigFor(node), EnergySourceRegistry());
  REQUIRE(rapl.Open({0, ""}).ok());
  REQUIRE(rapl.Begin().ok());
  std::filesystem::remove(node.sys + "/class/powercap/intel-rapl:0/energy_uj");
  auto r = rapl.End();
  CHECK(r.status().code() == ErrorCode::kNotFound);
}

TEST_CASE("wrapping counter: wraps, resets and the first reading") {
  WrappingCounter c(100);
  CHECK(*c.Update(90) == 0);
  CHECK(*c.Update(95) == 5);
  CHECK(*c.Update(3) == 9);  // 95 -> 100 (5), wrap to 0 (1), -> 3 (3)
  WrappingCounter wide;      // 64-bit: backwards is a reset
  CHECK(*wide.Update(1000) == 0);
  CHECK(wide.Update(10).status().code() == ErrorCode::kUnavailable);
  CHECK(*wide.Update(15) == 5);  // re-based
  WrappingCounter out_of_range(100);
  CHECK(*out_of_range.Update(50) == 0);
  CHECK(out_of_range.Update(500).ok());  // an increase, even past the range
  CHECK(!out_of_range.Update(20).ok());  // from 500 (> range): not a wrap
}

}  // namespace seqpoint::collectors
