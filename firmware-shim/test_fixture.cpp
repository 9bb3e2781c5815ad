#include "firmware-shim/test_fixture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace seqpoint::firmware::testing {

namespace fs = std::filesystem;

std::vector<uint8_t> ReadBlob(const std::string& name) {
  const std::string path = SourceDir() + "/tests/data/gpu_metrics/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "missing test blob %s\n", path.c_str());
    std::abort();
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteFile(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

namespace {

void Hwmon(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [name, value] : files) WriteFile(dir + "/" + name, value + "\n");
}

}  // namespace

int BuildStandardFixture(const std::string& root) {
  const std::string drm = root + "/sys/class/drm";
  // card0: discrete RDNA2 board (MangoHud's v1.3 capture), full amdgpu hwmon set.
  const std::string c0 = drm + "/card0/device";
  WriteBytes(c0 + "/gpu_metrics", ReadBlob("mangohud_gpu_metrics.bin"));
  WriteFile(c0 + "/vendor", "0x1002\n");
  WriteFile(c0 + "/device", "0x73bf\n");
  WriteFile(c0 + "/uevent", "DRIVER=amdgpu\nPCI_ID=1002:73BF\nPCI_SLOT_NAME=0000:03:00.0\n");
  Hwmon(c0 + "/hwmon/hwmon2", {{"name", "amdgpu"},
                               {"power1_average", "33000000"},
                               {"power1_cap", "255000000"},
                               {"temp1_input", "36000"},
                               {"temp1_label", "edge"},
                               {"temp2_input", "49000"},
                               {"temp2_label", "junction"},
                               {"temp3_input", "36000"},
                               {"temp3_label", "mem"},
                               {"freq1_input", "2165000000"},
                               {"freq1_label", "sclk"},
                               {"freq2_input", "1000000000"},
                               {"freq2_label", "mclk"},
                               {"in0_input", "1025"},
                               {"in0_label", "vddgfx"},
                               {"fan1_input", "0"}});
  // power1_input of card0 is a FIFO whose writer never writes: reads fail with EAGAIN.
  const std::string fifo = c0 + "/hwmon/hwmon2/power1_input";
  int writer = -1;
  if (::mkfifo(fifo.c_str(), 0644) == 0) writer = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);
  WriteFile(drm + "/card0-DP-1/status", "disconnected\n");  // a connector, not a GPU
  WriteFile(drm + "/renderD128/dev", "226:128\n");

  // card1: Van Gogh APU (MangoHud's v2.2 capture).
  const std::string c1 = drm + "/card1/device";
  WriteBytes(c1 + "/gpu_metrics", ReadBlob("mangohud_gpu_metrics_apu.bin"));
  WriteFile(c1 + "/vendor", "0x1002\n");
  WriteFile(c1 + "/device", "0x163f\n");
  WriteFile(c1 + "/uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:04:00.0\n");
  Hwmon(c1 + "/hwmon/hwmon3", {{"name", "amdgpu"},
                               {"power1_average", "18844000"},
                               {"temp1_input", "81750"},
                               {"temp1_label", "edge"},
                               {"freq1_input", "1040000000"},
                               {"freq1_label", "sclk"},
                               {"in0_input", "1100"},
                               {"in0_label", "vddgfx"},
                               {"in1_input", "900"},
                               {"in1_label", "vddnb"}});

  // card2: RX 6900 XT, whose sysfs read returned a whole 4096-byte page; no hwmon.
  const std::string c2 = drm + "/card2/device";
  WriteBytes(c2 + "/gpu_metrics", ReadBlob("amdgpu-sysfs-rs_rx6900xt.bin"));
  WriteFile(c2 + "/vendor", "0x1002\n");
  WriteFile(c2 + "/device", "0x73bf\n");

  // card3: a table that is not one (MangoHud's invalid capture) and a broken hwmon value.
  const std::string c3 = drm + "/card3/device";
  WriteBytes(c3 + "/gpu_metrics", ReadBlob("mangohud_gpu_metrics_invalid.bin"));
  Hwmon(c3 + "/hwmon/hwmon4", {{"name", "amdgpu"}, {"power1_average", "not-a-number"}});

  // card4: a GPU of another vendor: no gpu_metrics, hwmon with an energy counter.
  const std::string c4 = drm + "/card4/device";
  WriteFile(c4 + "/vendor", "0x8086\n");
  WriteFile(c4 + "/device", "0x56a0\n");
  Hwmon(c4 + "/hwmon/hwmon5", {{"name", "i915"}, {"energy1_input", "123456789"}});

  // card5: RX 7600S (RDNA3) v1.3 capture with both power attributes.
  const std::string c5 = drm + "/card5/device";
  WriteBytes(c5 + "/gpu_metrics", ReadBlob("amdgpu-sysfs-rs_rx7600s.bin"));
  WriteFile(c5 + "/vendor", "0x1002\n");
  WriteFile(c5 + "/device", "0x7480\n");
  Hwmon(c5 + "/hwmon/hwmon6", {{"name", "amdgpu"},
                               {"power1_average", "1000000"},
                               {"power1_input", "2000000"},
                               {"temp1_input", "53000"},
                               {"temp1_label", "edge"}});
  return writer;
}

}  // namespace seqpoint::firmware::testing
