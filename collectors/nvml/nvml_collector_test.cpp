// NVML through dlopen against a test double (testdata/fake_nvml.c) that replays values
// recorded from a real A100-SXM4-80GB, plus the absence paths against this node, which has no
// NVIDIA driver. Proven on a real GPU only where a device machine is lent (not in this build).
#include "collectors/nvml/nvml_collector.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <chrono>
#include <map>

#include "common/clock.h"

namespace seqpoint::collectors {
namespace {

NvmlOptions Fake() {
  NvmlOptions o;
  o.library = SEQPOINT_FAKE_NVML_PATH;
  return o;
}

// Sets the fake's knobs for one test case and clears them after.
struct FakeEnv {
  FakeEnv(std::initializer_list<std::pair<const char*, const char*>> vars) : vars_(vars) {
    for (const auto& [k, v] : vars_) setenv(k, v, 1);
  }
  ~FakeEnv() {
    for (const auto& [k, v] : vars_) unsetenv(k);
  }
  FakeEnv(const FakeEnv&) = delete;
  FakeEnv& operator=(const FakeEnv&) = delete;
  std::vector<std::pair<const char*, const char*>> vars_;
};

std::map<std::string, Sample> ByName(const std::vector<Sample>& samples) {
  std::map<std::string, Sample> m;
  for (const Sample& s : samples) m[s.name] = s;
  return m;
}

constexpr double kMiB = 1024.0 * 1024.0;

// Opens and waits for the energy counter's period, measured on its own thread (so the tests'
// energy reads are theirs alone: the A100 double's counter moves on every read).
Status OpenMeasured(NvmlCollector& nvml, const NvmlOptions& o, const Target& t) {
  SEQPOINT_RETURN_IF_ERROR(nvml.Open(t));
  if (!o.energy_periods->WaitIdle(std::chrono::seconds(30))) return Internal("still measuring");
  return Status::Ok();
}

}  // namespace

TEST_CASE("nvml: recorded A100 values through dlopen, energy as a window delta") {
  // The A100 double's counter moves on every read: on the test's clock, which does not move,
  // its update period measures 0, so every window keeps its energy (nvml_energy_window.h).
  FakeClock clock;
  NvmlOptions o = Fake();
  o.field_ids = {NVML_FI_DEV_MEMORY_TEMP, 9999};
  NvmlCollector nvml(o);
  REQUIRE(OpenMeasured(nvml, o, {0, ""}).ok());
  // Series carry the GPU's recorded UUID; Ampere has no GPM, and says so.
  CHECK(nvml.Describe().find("gpu0=GPU-513536b6-7d19-9063-b049-1e69664bb298") != std::string::npos);
  CHECK(nvml.Describe().find("GPM not supported on NVIDIA A100-SXM4-80GB") != std::string::npos);
  REQUIRE(nvml.Begin().ok());
  auto r = nvml.End();
  REQUIRE(r.ok());
  auto v = ByName(*r);
  CHECK(v["nvml:gpu0:energy"].value == 6703000);  // 67.03 W over the fake's 100 ms step
  CHECK(v["nvml:gpu0:energy"].unit == "uJ");
  CHECK(v["nvml:gpu0:power"].value == doctest::Approx(67.03));
  CHECK(v["nvml:gpu0:sm_clock"].value == 1275);
  CHECK(v["nvml:gpu0:mem_clock"].value == 1593);
  CHECK(v["nvml:gpu0:mem_used"].value == 50 * kMiB);
  CHECK(v["nvml:gpu0:mem_total"].value == 81920 * kMiB);  // the A100 80GB's framebuffer
  CHECK(v["nvml:gpu0:mem_total"].kind == SampleKind::kGauge);
  CHECK(v["nvml:gpu0:field82"].value == 44);  // NVML_FI_DEV_MEMORY_TEMP
  // Utilization is N/A under MIG; an unknown field id is named, not reported as 0.
  CHECK(v.count("nvml:gpu0:util_gpu") == 0);
  CHECK(v.count("nvml:gpu0:field9999") == 0);
  CHECK(nvml.warnings().find("nvmlDeviceGetUtilizationRates on gpu0: Not Supported") !=
        std::string::npos);
  CHECK(nvml.warnings().find("field9999") != std::string::npos);
}

TEST_CASE("nvml: absence of the library or the driver is a clean 'not present'") {
  NvmlOptions missing;
  missing.library = "/nonexistent/libnvidia-ml.so.1";
  NvmlCollector a(missing);
  Status s = a.Open({0, ""});
  CHECK(s.code() == ErrorCode::kNotFound);
  CHECK(s.message().find("NVML not present: dlopen(/nonexistent/libnvidia-ml.so.1)") == 0);

  NvmlCollector node_default{NvmlOptions{}};  // this node has no NVIDIA driver
  Status d = node_default.Open({0, ""});
  if (!d.ok()) CHECK(IsAbsent(d));

  NvmlOptions not_nvml;
  not_nvml.library = "libm.so.6";  // a real library that is not NVML
  NvmlCollector b(not_nvml);
  Status n = b.Open({0, ""});
  CHECK(n.code() == ErrorCode::kNotFound);
  CHECK(n.message().find("lacks nvmlInit_v2") != std::string::npos);

  FakeEnv env{{"FAKE_NVML_INIT_RESULT", "9"}};
  NvmlCollector c(Fake());
  Status i = c.Open({0, ""});
  CHECK(i.code() == ErrorCode::kNotFound);
  CHECK(i.message().find("Driver Not Loaded") != std::string::npos);
  NvmlEnergySource src(SEQPOINT_FAKE_NVML_PATH);
  CHECK(IsAbsent(src.Open()));
}

// Energy reads the period measurement makes per GPU on the A100 double under the frozen test
// clock: a first read, then one per change, each a gap of 0 after the first change.
constexpr int kProbeReads = 2 + UpdatePeriodProbe::kGaps;

TEST_CASE("nvml: a GPU that falls off the bus is left out, the others still count") {
  FakeClock clock;
  const std::string after = std::to_string(2 * kProbeReads + 2);
  FakeEnv env{{"FAKE_NVML_DEVICES", "2"}, {"FAKE_NVML_LOST_AFTER", after.c_str()}};
  const NvmlOptions o = Fake();
  NvmlCollector nvml(o);
  REQUIRE(OpenMeasured(nvml, o, {0, ""}).ok());  // the measurements' reads
  REQUIRE(nvml.Begin().ok());                    // energy reads 1 and 2 after them
  auto r = nvml.End();                           // GPU 0 is lost from now on
  REQUIRE(r.ok());
  auto v = ByName(*r);
  CHECK(v.count("nvml:gpu0:energy") == 0);
  CHECK(v.count("nvml:gpu0:power") == 0);
  CHECK(v["nvml:gpu1:energy"].value == 6703000);
  CHECK(nvml.warnings().find("gpu0: GPU is lost") != std::string::npos);
  nvml.Close();

  const std::string after_one = std::to_string(kProbeReads + 1);
  FakeEnv one{{"FAKE_NVML_DEVICES", "1"}, {"FAKE_NVML_LOST_AFTER", after_one.c_str()}};
  const NvmlOptions o1 = Fake();
  NvmlCollector single(o1);
  REQUIRE(OpenMeasured(single, o1, {0, ""}).ok());
  REQUIRE(single.Begin().ok());
  auto lost = single.End();
  CHECK(lost.status().code() == ErrorCode::kUnavailable);
  CHECK(lost.status().message().find("GPU is lost") != std::string::npos);
}

TEST_CASE("nvml: a GPU in use by a profiler makes the reading void, marked counters busy") {
  FakeClock clock;
  const std::string after = std::to_string(kProbeReads + 1);
  FakeEnv env{{"FAKE_NVML_DEVICES", "1"}, {"FAKE_NVML_IN_USE_AFTER", after.c_str()}};
  const NvmlOptions o = Fake();
  NvmlCollector nvml(o);
  REQUIRE(OpenMeasured(nvml, o, {0, ""}).ok());
  REQUIRE(nvml.Begin().ok());  // energy read 1
  auto r = nvml.End();         // read 2: NVML_ERROR_IN_USE
  REQUIRE(!r.ok());
  CHECK(IsCountersBusy(r.status()));  // the run manager backs off (collector_backoff.h)
  CHECK(r.status().message().find("In use by another client") != std::string::npos);
}

TEST_CASE("nvml: device selection by index, PCI address or UUID") {
  FakeEnv env{{"FAKE_NVML_DEVICES", "2"}};
  NvmlCollector by_index(Fake());
  REQUIRE(by_index.Open({0, "1"}).ok());
  CHECK(by_index.Describe().find("gpu1=GPU-513536b6-7d19-9063-b049-1e69664bb201") !=
        std::string::npos);
  NvmlCollector by_pci(Fake());
  REQUIRE(by_pci.Open({0, "0000:02:00.0"}).ok());
  CHECK(by_pci.Describe().find("gpu1=") != std::string::npos);
  NvmlCollector by_uuid(Fake());
  REQUIRE(by_uuid.Open({0, "GPU-513536b6-7d19-9063-b049-1e69664bb201"}).ok());
  CHECK(by_uuid.Describe().find("gpu1=") != std::string::npos);
  NvmlCollector none(Fake());
  CHECK(none.Open({0, "7"}).code() == ErrorCode::kNotFound);
}

TEST_CASE("nvml: energy source sums every GPU's counter") {
  FakeEnv env{{"FAKE_NVML_DEVICES", "2"}};
  NvmlEnergySource src(SEQPOINT_FAKE_NVML_PATH);
  REQUIRE(src.Open().ok());
  auto a = src.ReadMicrojoules();
  auto b = src.ReadMicrojoules();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*b - *a == 2 * 6703000.0);
}

}  // namespace seqpoint::collectors
