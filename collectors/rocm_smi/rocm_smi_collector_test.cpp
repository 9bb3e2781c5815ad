// ROCm SMI: the real librocm_smi64 reading a fake /sys/class (testdata/rx6900xt, values
// captured from a real Radeon RX 6900 XT) mounted in a private mount namespace. Each case runs
// its body in a forked child (RunWithFakeSysClass) and returns "key=value" lines to check here.
#include "collectors/rocm_smi/rocm_smi_collector.h"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "collectors/collectors_test_util.h"

namespace seqpoint::collectors {
namespace {

std::string FixtureClassDir() {
  return testing::SourceDir() + "/collectors/rocm_smi/testdata/rx6900xt/class";
}
constexpr char kGpuMetrics[] =
    "/sys/class/drm/card0/device/gpu_metrics";  // as seen inside the namespace

// energy_accumulator of gpu_metrics_v1_3 (drivers/gpu/drm/amd/include/kgd_pp_interface.h):
// header (4 bytes), six u16 temperatures, three u16 activities, u16 average_socket_power,
// then the u64 at offset 24.
constexpr long kEnergyOffset = 24;

uint64_t ReadAccumulator() {
  std::ifstream f(kGpuMetrics, std::ios::binary);
  f.seekg(kEnergyOffset);
  uint64_t v = 0;
  f.read(reinterpret_cast<char*>(&v), sizeof v);
  return v;
}

void WriteAccumulator(uint64_t v) {
  std::fstream f(kGpuMetrics, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(kEnergyOffset);
  f.write(reinterpret_cast<const char*>(&v), sizeof v);
}

std::string Lines(const Status& s, const std::vector<Sample>& samples) {
  std::ostringstream out;
  out << "status=" << s.ToString() << "\n";
  out.precision(15);
  for (const Sample& x : samples) out << x.name << "=" << x.value << " " << x.unit << "\n";
  return out.str();
}

std::map<std::string, std::string> Parse(const std::string& text) {
  std::map<std::string, std::string> m;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

// The number at the start of a "value unit" string.
double Num(const std::string& text) { return text.empty() ? -1 : std::stod(text); }

// Copies the fixture so that a case may change or delete files.
struct Fixture {
  testing::ScratchDir dir;
  std::string class_dir = dir.path() + "/class";
  Fixture() { testing::CopyTree(FixtureClassDir(), class_dir); }
};

}  // namespace

TEST_CASE("rocm_smi: real library, fake sysfs of an RX 6900 XT, values as captured") {
  Fixture fx;
  auto run = testing::RunWithFakeSysClass(fx.class_dir, [] {
    RocmSmiCollector c("/sys");
    Status s = c.Open({0, ""});
    if (!s.ok()) return Lines(s, {});
    std::string out = "describe=" + c.Describe() + "\n";
    const uint64_t acc = ReadAccumulator();
    out += "accumulator=" + std::to_string(acc) + "\n";
    s = c.Begin();
    WriteAccumulator(acc + 1000);  // the GPU spent 1000 counts (15.3 uJ each) meanwhile
    Result<std::vector<Sample>> r = c.End();
    out += "warnings=" + c.warnings() + "\n";
    out += r.ok() ? Lines(s, *r) : Lines(r.status(), {});
    c.Close();
    return out;
  });
  if (!run.ran) {
    MESSAGE("skipped: " << run.output);
    return;
  }
  auto v = Parse(run.output);
  INFO(run.output);
  CHECK(v["status"] == "OK");
  CHECK(v["describe"] == "rocm_smi: gpu0=0000:0c:00.0");
  CHECK(v["accumulator"] == "17691682");  // the captured table, read at the layout's offset
  // 1000 counts at rocm_smi_lib's hard-coded resolution, 15.3 uJ (kEnergyCounterResolution).
  CHECK(Num(v["rocm_smi:gpu0:energy"]) == doctest::Approx(15300).epsilon(1e-6));
  CHECK(v["rocm_smi:gpu0:power"] == "36 W");     // power1_average 36000000 uW
  CHECK(v["rocm_smi:gpu0:busy"] == "3 %");       // gpu_busy_percent
  CHECK(v["rocm_smi:gpu0:sclk"] == "500 MHz");   // pp_dpm_sclk "0: 500Mhz *"
  CHECK(v["rocm_smi:gpu0:mclk"] == "1000 MHz");  // pp_dpm_mclk "3: 1000Mhz *"
  CHECK(v["rocm_smi:gpu0:vram_used"] == "668274688 bytes");
  CHECK(v["rocm_smi:gpu0:vram_total"] == "17163091968 bytes");  // mem_info_vram_total, 16 GiB
  CHECK(v["rocm_smi:gpu0:temp_edge"] == "56 C");  // temp1_input 56000, label edge
  CHECK(v["warnings"].empty());
}

TEST_CASE("rocm_smi: device selection by index or PCI address, unknown device named") {
  Fixture fx;
  auto run = testing::RunWithFakeSysClass(fx.class_dir, [] {
    std::string out;
    for (const char* dev : {"0", "0000:0c:00.0", "1"}) {
      RocmSmiCollector c("/sys");
      out += std::string("open[") + dev + "]=" + c.Open({0, dev}).ToString() + "\n";
    }
    return out;
  });
  if (!run.ran) {
    MESSAGE("skipped: " << run.output);
    return;
  }
  auto v = Parse(run.output);
  CHECK(v["open[0]"] == "OK");
  CHECK(v["open[0000:0c:00.0]"] == "OK");
  CHECK(v["open[1]"] == "not found: no AMD GPU '1' here; devices: 0 (0000:0c:00.0)");
}

TEST_CASE("rocm_smi: a VRAM capacity the driver does not give is left out and named") {
  Fixture fx;
  std::filesystem::remove(fx.class_dir + "/drm/card0/device/mem_info_vram_total");
  auto run = testing::RunWithFakeSysClass(fx.class_dir, [] {
    RocmSmiCollector c("/sys");
    Status s = c.Open({0, ""});
    if (!s.ok()) return Lines(s, {});
    s = c.Begin();
    Result<std::vector<Sample>> r = c.End();
    std::string out = "warnings=" + c.warnings() + "\n";
    return out + (r.ok() ? Lines(s, *r) : Lines(r.status(), {}));
  });
  if (!run.ran) {
    MESSAGE("skipped: " << run.output);
    return;
  }
  INFO(run.output);
  auto v = Parse(run.output);
  CHECK(v["status"] == "OK");
  CHECK(v.count("rocm_smi:gpu0:vram_total") == 0);  // never a 0 capacity
  CHECK(v["rocm_smi:gpu0:vram_used"] == "668274688 bytes");
  CHECK(v["warnings"].find("rocm_smi:gpu0:vram_total: ") != std::string::npos);
}

TEST_CASE("rocm_smi: a GPU that disappears mid-measurement is a clear status, not a crash") {
  Fixture fx;
  auto run = testing::RunWithFakeSysClass(fx.class_dir, [&] {
    RocmSmiCollector c("/sys");
    Status s = c.Open({0, ""});
    if (!s.ok()) return Lines(s, {});
    s = c.Begin();
    // The device goes away: its sysfs directory is removed (hot unplug, driver unbind).
    std::filesystem::remove_all(fx.class_dir + "/pci-devices");
    Result<std::vector<Sample>> r = c.End();
    return r.ok() ? Lines(Status::Ok(), *r) : Lines(r.status(), {});
  });
  if (!run.ran) {
    MESSAGE("skipped: " << run.output);
    return;
  }
  INFO(run.output);
  auto v = Parse(run.output);
  CHECK(v["status"].rfind("unavailable: rocm_smi: no value could be read from any GPU", 0) == 0);
}

TEST_CASE("rocm_smi: energy source sums the counter, a counter reset is not a wrong number") {
  Fixture fx;
  auto run = testing::RunWithFakeSysClass(fx.class_dir, [] {
    RocmSmiEnergySource src("/sys");
    Status s = src.Open();
    std::string out = "open=" + s.ToString() + "\n";
    if (!s.ok()) return out;
    const uint64_t acc = ReadAccumulator();
    Result<double> a = src.ReadMicrojoules();
    WriteAccumulator(acc + 2000);
    Result<double> b = src.ReadMicrojoules();
    WriteAccumulator(5);  // firmware reset: the accumulator starts again
    Result<double> c = src.ReadMicrojoules();
    Result<double> d = src.ReadMicrojoules();
    out += "delta=" + std::to_string(*b - *a) + "\n";
    out += "reset=" + c.status().ToString() + "\n";
    out += "after=" + (d.ok() ? std::to_string(*d - *b) : d.status().ToString()) + "\n";
    return out;
  });
  if (!run.ran) {
    MESSAGE("skipped: " << run.output);
    return;
  }
  INFO(run.output);
  auto v = Parse(run.output);
  CHECK(v["open"] == "OK");
  CHECK(Num(v["delta"]) == doctest::Approx(30600).epsilon(1e-6));
  CHECK(v["reset"].find("went backwards") != std::string::npos);
  CHECK(v["after"] == "0.000000");  // re-based: no bogus jump
}

TEST_CASE("rocm_smi: a node without an AMD GPU is 'not present', quietly") {
  testing::ScratchDir empty;
  RocmSmiCollector c(empty.path());
  Status s = c.Open({0, ""});
  CHECK(s.code() == ErrorCode::kNotFound);
  CHECK(s.message().find("no AMD GPU") != std::string::npos);
  RocmSmiEnergySource src(empty.path());
  CHECK(IsAbsent(src.Open()));
}

}  // namespace seqpoint::collectors
