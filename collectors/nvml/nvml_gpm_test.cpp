// NVML GPM against the NVML double in node mode (testdata/fake_nvml_gpm.c): nvml.h's structs and
// versions, per-metric return codes, and the 100 ms refresh, with a clock the test drives (the
// agent's FakeClock and the double's together). The fixture's Blackwell GPU has GPM; its A100,
// Ada, 3080 and T4 do not.
#include "collectors/nvml/nvml_gpm.h"

#include <dlfcn.h>
#include <doctest/doctest.h>
#include <stdlib.h>

#include <chrono>
#include <map>

#include "collectors/nvml/nvml_collector.h"
#include "common/clock.h"

namespace seqpoint::collectors {
namespace {

const std::string kNode = std::string(SEQPOINT_GPU_TESTDATA) + "/node5.nvidia-smi.xml";
constexpr int64_t kMs = 1'000'000;

// The double's controls, from the copy the collector dlopen'ed.
struct Double {
  Double() {
    handle = dlopen(SEQPOINT_FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(handle != nullptr);
    set_time =
        reinterpret_cast<void (*)(unsigned long long)>(dlsym(handle, "fake_nvml_set_time_ns"));
    set_activity = reinterpret_cast<void (*)(double, double, double, double, double)>(
        dlsym(handle, "fake_nvml_set_activity"));
    set_lost = reinterpret_cast<void (*)(unsigned, int)>(dlsym(handle, "fake_nvml_set_lost"));
    REQUIRE((set_time != nullptr && set_activity != nullptr && set_lost != nullptr));
  }
  ~Double() { dlclose(handle); }
  void* handle;
  void (*set_time)(unsigned long long);
  void (*set_activity)(double, double, double, double, double);
  void (*set_lost)(unsigned, int);
};

struct Env {
  explicit Env(const char* extra) {
    setenv("FAKE_NVML_XML", kNode.c_str(), 1);
    setenv("FAKE_NVML_EXTRA", extra, 1);
  }
  ~Env() {
    unsetenv("FAKE_NVML_XML");
    unsetenv("FAKE_NVML_EXTRA");
  }
};

std::map<std::string, Sample> ByName(const std::vector<Sample>& samples) {
  std::map<std::string, Sample> m;
  for (const Sample& s : samples) m[s.name] = s;
  return m;
}

}  // namespace

TEST_CASE("nvml gpm: struct layouts of nvml.h") {
  CHECK(sizeof(nvmlGpmMetric_t) == 40);
  CHECK(sizeof(nvmlGpmMetricsGet_t) == 24 + 40 * NVML_GPM_METRIC_MAX);
  CHECK(sizeof(nvmlGpmSupport_t) == 8);
  CHECK(sizeof(nvmlProcessInfo_t) == 24);
  CHECK(NVML_GPM_METRICS_GET_VERSION == 1);  // the raw integer, not NVML_STRUCT_VERSION
}

TEST_CASE("nvml gpm: a window on a GPM GPU, values exact over whole refreshes") {
  Env env("4:8800:30000");  // a trainer on the Blackwell GPU (NVML index 4)
  FakeClock clock(1'700'000'000'000'000'000, 10'000 * kMs);
  NvmlOptions o;
  o.library = SEQPOINT_FAKE_NVML_PATH;
  NvmlCollector nvml(o);
  REQUIRE(nvml.Open({8800, ""}).ok());
  CHECK(nvml.Describe().find("(GPM supported: its values only over windows of 2000 ms or more)") !=
        std::string::npos);
  Double fake;
  fake.set_time(10'000 * kMs);
  fake.set_activity(0.75, 0.5, 0.25, 0.125, 1000.0);  // PCIe 1000 MiB/s
  REQUIRE(nvml.Begin().ok());  // at a refresh tick: the sample's edge is exact
  clock.Advance(3'000 * kMs);
  fake.set_time(13'000 * kMs);
  auto r = nvml.End();
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  auto v = ByName(*r);
  CHECK(v["nvml:gpu4:sm_active"].value == doctest::Approx(0.75));
  CHECK(v["nvml:gpu4:sm_active"].unit == "ratio");
  CHECK(v["nvml:gpu4:sm_active"].kind == SampleKind::kGauge);
  CHECK(v["nvml:gpu4:sm_active"].device == "GPU-12345678-aaaa-bbbb-cccc-0123456789ab");
  CHECK(v["nvml:gpu4:tensor_active"].value == doctest::Approx(0.5));
  CHECK(v["nvml:gpu4:dram_active"].value == doctest::Approx(0.25));
  CHECK(v["nvml:gpu4:fp32_active"].value == doctest::Approx(0.125));
  CHECK(v["nvml:gpu4:pcie_tx_bytes"].value == doctest::Approx(3000.0 * 1048576.0));
  CHECK(v["nvml:gpu4:pcie_tx_bytes"].kind == SampleKind::kDelta);
  CHECK(v["nvml:gpu4:pcie_rx_bytes"].value == doctest::Approx(1500.0 * 1048576.0));
  CHECK(v["nvml:gpu4:gpm_window_ns"].value == 3'000 * kMs);
  // Widened, not aggregated: the bound on each ratio's edge error, 2 x 100 ms / 3 s.
  CHECK(v["nvml:gpu4:gpm_edge_error"].value == doctest::Approx(0.2 / 3.0));
  CHECK(v["nvml:gpu4:gpm_edge_error"].unit == "ratio");
  // Metrics the GPU answers NOT_SUPPORTED for are left out and named, not 0.
  CHECK(v.count("nvml:gpu4:sm_occupancy") == 0);
  CHECK(nvml.warnings().find("nvml:gpu4:sm_occupancy: Not Supported") != std::string::npos);
}

TEST_CASE("nvml gpm: the 100 ms refresh: edges off the tick, short windows left out") {
  Env env("4:8800:30000");
  FakeClock clock(1'700'000'000'000'000'000, 20'000 * kMs);
  NvmlOptions o;
  o.library = SEQPOINT_FAKE_NVML_PATH;
  NvmlCollector nvml(o);
  REQUIRE(nvml.Open({8800, ""}).ok());
  Double fake;
  // Idle until 20.090 s, busy (sm 1.0) for the window 20.090 .. 22.090 s, idle after.
  fake.set_time(20'000 * kMs);
  fake.set_activity(0, 0, 0, 0, 0);
  fake.set_time(20'090 * kMs);
  clock.Advance(90 * kMs);
  fake.set_activity(1.0, 0, 0, 0, 0);
  REQUIRE(nvml.Begin().ok());  // the sample holds the 20.000 s refresh: 90 ms early
  fake.set_time(22'090 * kMs);
  clock.Advance(2'000 * kMs);
  fake.set_activity(0, 0, 0, 0, 0);
  auto r = nvml.End();  // holds the 22.000 s refresh: the window GPM saw is 20.0 .. 22.0 s
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  auto v = ByName(*r);
  // Busy for 1.91 of the 2.0 s GPM saw: 0.955, within the documented 2 x 100 ms / 2 s of 1.0.
  CHECK(v["nvml:gpu4:sm_active"].value == doctest::Approx(0.955));
  CHECK(std::abs(v["nvml:gpu4:sm_active"].value - 1.0) <= 0.1);
  // ... and within the bound the window carries beside it.
  CHECK(v["nvml:gpu4:gpm_edge_error"].value == doctest::Approx(0.1));
  CHECK(std::abs(v["nvml:gpu4:sm_active"].value - 1.0) <= v["nvml:gpu4:gpm_edge_error"].value);
  // A 40 ms window (a short iteration) is not reported as exact: left out, and said why.
  REQUIRE(nvml.Begin().ok());
  clock.Advance(40 * kMs);
  fake.set_time(22'130 * kMs);
  auto short_window = nvml.End();
  REQUIRE(short_window.ok());  // NVML's other values still come
  CHECK(ByName(*short_window).count("nvml:gpu4:sm_active") == 0);
  CHECK(nvml.warnings().find("window 40 ms is shorter than 2000 ms") != std::string::npos);
}

TEST_CASE("nvml gpm: not supported on a pre-Hopper GPU is named, no GPM symbols degrade") {
  Env env("2:8801:1000");  // on the A100 (Ampere)
  NvmlOptions o;
  o.library = SEQPOINT_FAKE_NVML_PATH;
  NvmlCollector nvml(o);
  REQUIRE(nvml.Open({8801, ""}).ok());
  CHECK(nvml.Describe().find("GPM not supported on NVIDIA A100-SXM4-80GB (Hopper or later") !=
        std::string::npos);
  REQUIRE(nvml.Begin().ok());
  auto r = nvml.End();
  REQUIRE(r.ok());  // the rest of NVML still measured
  CHECK(ByName(*r).count("nvml:gpu2:sm_active") == 0);
  nvml.Close();

  // An R470-era NVML: no GPM entry points (and no _v3 process list): device-wide NVML values
  // still come, GPM says why not.
  NvmlOptions old;
  old.library = SEQPOINT_FAKE_NVML_OLD_PATH;
  NvmlCollector nvml_old(old);
  REQUIRE(nvml_old.Open({0, "4"}).ok());
  CHECK(nvml_old.Describe().find("no GPM entry points") != std::string::npos);
  REQUIRE(nvml_old.Begin().ok());
  CHECK(nvml_old.End().ok());
}

TEST_CASE("nvml gpm: a GPU lost mid-run leaves its values out") {
  Env env("4:8800:30000");
  setenv("FAKE_NVML_LOST", "4", 1);
  NvmlOptions o;
  o.library = SEQPOINT_FAKE_NVML_PATH;
  NvmlCollector nvml(o);
  auto opened = nvml.Open({0, "4"});  // the handle opens; every read says GPU is lost
  unsetenv("FAKE_NVML_LOST");
  REQUIRE(opened.ok());
  REQUIRE(nvml.Begin().ok());
  auto r = nvml.End();
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("GPU is lost") != std::string::npos);
}

TEST_CASE("nvml gpm: a process on two GPUs, one falls off the bus mid-run, the other counts") {
  // pid 8802 holds contexts on the Blackwell (GPM, NVML index 4) and the 3080 (index 1).
  Env env("4:8802:20000;1:8802:300");
  FakeClock clock(1'700'000'000'000'000'000, 30'000 * kMs);
  NvmlOptions o;
  o.library = SEQPOINT_FAKE_NVML_PATH;
  NvmlCollector nvml(o);
  REQUIRE(nvml.Open({8802, ""}).ok());
  REQUIRE(o.energy_periods->WaitIdle(std::chrono::seconds(30)));  // energy from the first window
  Double fake;
  fake.set_time(30'000 * kMs);
  fake.set_activity(0.5, 0, 0, 0, 0);
  auto window = [&]() {
    REQUIRE(nvml.Begin().ok());
    clock.Advance(2'000 * kMs);
    fake.set_time(static_cast<unsigned long long>(clock.MonotonicNs()));
    return nvml.End();
  };
  // Both GPUs read, each sample under its own GPU's UUID; GPM on the Blackwell only.
  auto both = window();
  REQUIRE_MESSAGE(both.ok(), both.status().ToString());
  auto v = ByName(*both);
  CHECK(v.count("nvml:gpu4:energy") == 1);
  CHECK(v.count("nvml:gpu1:energy") == 1);
  CHECK(v["nvml:gpu4:sm_active"].value == doctest::Approx(0.5));
  CHECK(v["nvml:gpu4:energy"].device != v["nvml:gpu1:energy"].device);
  CHECK(v.count("nvml:gpu1:sm_active") == 0);

  // The Blackwell falls off the bus: its values (GPM included) are left out and named; the
  // 3080's still come.
  fake.set_lost(4, 1);
  auto one = window();
  REQUIRE_MESSAGE(one.ok(), one.status().ToString());
  auto w = ByName(*one);
  CHECK(w.count("nvml:gpu1:energy") == 1);
  for (const auto& [name, sample] : w) CHECK_MESSAGE(!name.starts_with("nvml:gpu4:"), name);
  CHECK(nvml.warnings().find("nvml:gpu4:energy: ") != std::string::npos);
  CHECK(nvml.warnings().find("GPU is lost") != std::string::npos);

  // Both lost: the window is void, with NVML's reason.
  fake.set_lost(1, 1);
  auto none = window();
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("GPU is lost") != std::string::npos);
  fake.set_lost(4, 0);
  fake.set_lost(1, 0);
}

TEST_CASE(
    "nvml gpm: under MIG, the process's own GPU instance; one without a compute instance "
    "gives no data, said so") {
  // The fixture's MIG layout (GPU 2) read as a Hopper: pid 7002 runs in GPU instance 4 /
  // compute instance 0; pid 7003 is listed in GPU instance 5 with no compute instance.
  Env env("2:7002:9800:4:0;2:7003:100:5:4294967295");
  setenv("FAKE_NVML_HOPPER", "2", 1);
  FakeClock clock(1'700'000'000'000'000'000, 40'000 * kMs);
  NvmlOptions o;
  o.library = SEQPOINT_FAKE_NVML_PATH;
  NvmlCollector nvml(o);
  REQUIRE(nvml.Open({7002, ""}).ok());
  unsetenv("FAKE_NVML_HOPPER");
  Double fake;
  auto last_gi = reinterpret_cast<unsigned (*)()>(dlsym(fake.handle, "fake_nvml_last_mig_gi"));
  REQUIRE((last_gi != nullptr));
  fake.set_time(40'000 * kMs);
  fake.set_activity(0.25, 0, 0, 0, 0);
  REQUIRE(nvml.Begin().ok());
  CHECK(last_gi() == 4);  // nvmlGpmMigSampleGet with the process's own GPU instance
  clock.Advance(2'000 * kMs);
  fake.set_time(42'000 * kMs);
  auto r = nvml.End();
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  auto v = ByName(*r);
  CHECK(v["nvml:gpu2:sm_active"].value == doctest::Approx(0.25));
  CHECK(v["nvml:gpu2:sm_active"].device.ends_with("/gi4/ci0"));
  nvml.Close();

  // A GPU instance without a compute instance: GPM answers no data; named, the rest still read.
  setenv("FAKE_NVML_HOPPER", "2", 1);
  NvmlCollector no_ci(o);
  REQUIRE(no_ci.Open({7003, ""}).ok());
  unsetenv("FAKE_NVML_HOPPER");
  REQUIRE(no_ci.Begin().ok());
  CHECK(no_ci.warnings().find("No data") != std::string::npos);
  clock.Advance(2'000 * kMs);
  fake.set_time(44'000 * kMs);
  auto n = no_ci.End();
  REQUIRE_MESSAGE(n.ok(), n.status().ToString());
  CHECK(ByName(*n).count("nvml:gpu2:sm_active") == 0);
  CHECK(ByName(*n).count("nvml:gpu2:power") == 1);
  CHECK(no_ci.warnings().find("GPM: no first sample") != std::string::npos);
}

}  // namespace seqpoint::collectors
