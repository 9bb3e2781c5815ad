// The sysfs side against a fixture tree built from the real captures: discovery, hwmon units,
// and the failure modes of real drivers (EAGAIN from a hwmon attribute, garbage text, missing
// files, a device that disappears between discovery and read).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "firmware-shim/gpu_device.h"
#include "firmware-shim/test_fixture.h"

namespace seqpoint::firmware {
namespace {

using testing::BuildStandardFixture;
using testing::TempDir;
using testing::WriteFile;

struct Fixture {
  TempDir dir;
  int fifo_writer = BuildStandardFixture(dir.path());
  ~Fixture() {
    if (fifo_writer >= 0) ::close(fifo_writer);
  }
};

const HwmonSensor* Find(const std::vector<HwmonSensor>& list, const std::string& label) {
  for (const auto& s : list) {
    if (s.label == label) return &s;
  }
  return nullptr;
}

TEST_CASE("sysfs: discovery finds the GPU cards in order and skips connectors") {
  Fixture f;
  auto devices = DiscoverGpus(SysfsRoot(f.dir.path()));
  REQUIRE(devices.ok());
  std::vector<std::string> cards;
  for (const auto& d : *devices) cards.push_back(d.card());
  CHECK(cards == std::vector<std::string>{"card0", "card1", "card2", "card3", "card4", "card5"});
  CHECK((*devices)[0].has_gpu_metrics());
  CHECK((*devices)[0].has_hwmon());
  CHECK_FALSE((*devices)[2].has_hwmon());
  CHECK_FALSE((*devices)[4].has_gpu_metrics());
}

TEST_CASE("sysfs: a root without GPUs is an empty list, a missing root is NotFound") {
  TempDir empty;
  auto none = DiscoverGpus(SysfsRoot(empty.path()));
  REQUIRE(none.ok());
  CHECK(none->empty());
  auto missing = DiscoverGpus(SysfsRoot(empty.path() + "/does-not-exist"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);
}

TEST_CASE("sysfs: telemetry of a discrete GPU, gpu_metrics and hwmon in SI units") {
  Fixture f;
  auto devices = DiscoverGpus(SysfsRoot(f.dir.path()));
  REQUIRE(devices.ok());
  const DeviceTelemetry t = (*devices)[0].ReadAll();
  CHECK(t.pci_vendor == uint32_t{0x1002});
  CHECK(t.pci_device == uint32_t{0x73bf});
  CHECK(t.pci_slot == std::string("0000:03:00.0"));
  REQUIRE(t.metrics.has_value());
  CHECK(t.metrics->power.socket == 33.0);
  REQUIRE(t.hwmon.has_value());
  CHECK(t.hwmon->name == "amdgpu");
  CHECK(t.hwmon->dir == "hwmon/hwmon2");
  CHECK(t.hwmon->power_average_w == doctest::Approx(33.0));
  REQUIRE(Find(t.hwmon->temperatures_c, "junction") != nullptr);
  CHECK(Find(t.hwmon->temperatures_c, "junction")->value == doctest::Approx(49.0));
  CHECK(Find(t.hwmon->clocks_mhz, "sclk")->value == doctest::Approx(2165.0));
  CHECK(Find(t.hwmon->voltages_v, "vddgfx")->value == doctest::Approx(1.025));
  CHECK(t.hwmon->fans_rpm.size() == 1);
}

TEST_CASE("sysfs: EAGAIN from a broken hwmon attribute is Unavailable, the rest still reads") {
  Fixture f;
  REQUIRE(f.fifo_writer >= 0);
  auto devices = DiscoverGpus(SysfsRoot(f.dir.path()));
  REQUIRE(devices.ok());
  const DeviceTelemetry t = (*devices)[0].ReadAll();
  REQUIRE(t.hwmon.has_value());
  CHECK_FALSE(t.hwmon->power_input_w.has_value());
  REQUIRE(t.hwmon->errors.size() == 1);
  CHECK(t.hwmon->errors[0].first == "power1_input");
  CHECK(t.hwmon->errors[0].second.code() == ErrorCode::kUnavailable);
  CHECK(t.hwmon->power_average_w.has_value());
}

TEST_CASE("sysfs: garbage in a hwmon attribute is InvalidArgument naming the file") {
  Fixture f;
  auto devices = DiscoverGpus(SysfsRoot(f.dir.path()));
  REQUIRE(devices.ok());
  const DeviceTelemetry t = (*devices)[3].ReadAll();
  REQUIRE_FALSE(t.metrics.has_value());
  CHECK(t.metrics_status.code() == ErrorCode::kInvalidArgument);  // the invalid capture
  REQUIRE(t.hwmon.has_value());
  REQUIRE(t.hwmon->errors.size() == 1);
  CHECK(t.hwmon->errors[0].second.code() == ErrorCode::kInvalidArgument);
  CHECK(t.hwmon->errors[0].second.message().find("power1_average") != std::string::npos);
}

TEST_CASE("sysfs: a device that disappears after discovery reads as NotFound, no crash") {
  Fixture f;
  auto devices = DiscoverGpus(SysfsRoot(f.dir.path()));
  REQUIRE(devices.ok());
  std::filesystem::remove_all(f.dir.path() + "/sys/class/drm/card1");
  const GpuDevice& gone = (*devices)[1];
  auto m = gone.ReadGpuMetrics();
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == ErrorCode::kNotFound);
  const DeviceTelemetry t = gone.ReadAll();
  CHECK_FALSE(t.metrics.has_value());
  REQUIRE(t.hwmon.has_value());
  CHECK_FALSE(t.hwmon->power_average_w.has_value());
  CHECK_FALSE(t.hwmon->errors.empty());
  for (const auto& [file, status] : t.hwmon->errors) CHECK(status.code() == ErrorCode::kNotFound);
}

TEST_CASE("sysfs: reading a directory or a kernel file that fails is a Status, not a crash") {
  TempDir d;
  auto r = ReadIntegerFile(d.path());  // EISDIR
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kIoError);
  auto mem = ReadIntegerFile("/proc/self/mem");  // read at offset 0 fails with EIO
  CHECK_FALSE(mem.ok());
}

TEST_CASE("sysfs: the energy total of a device survives the counter being reset") {
  Fixture f;
  auto devices = DiscoverGpus(SysfsRoot(f.dir.path()));
  REQUIRE(devices.ok());
  GpuDevice& d = (*devices)[0];
  auto blob = testing::ReadBlob("mangohud_gpu_metrics.bin");
  const std::string path = d.device_dir() + "/gpu_metrics";
  auto write_energy = [&](uint64_t raw) {
    for (int i = 0; i < 8; ++i) blob[24 + i] = static_cast<uint8_t>(raw >> (8 * i));
    testing::WriteBytes(path, blob);
  };
  write_energy(65536 * 100);
  REQUIRE(d.ReadEnergyTotal().ok());
  write_energy(65536 * 150);
  auto total = d.ReadEnergyTotal();
  REQUIRE(total.ok());
  CHECK(**total == doctest::Approx(50.0));
  write_energy(65536 * 2);  // GPU reset: accumulator restarted
  total = d.ReadEnergyTotal();
  CHECK(**total == doctest::Approx(50.0));
  write_energy(65536 * 12);
  total = d.ReadEnergyTotal();
  CHECK(**total == doctest::Approx(60.0));
}

}  // namespace
}  // namespace seqpoint::firmware
