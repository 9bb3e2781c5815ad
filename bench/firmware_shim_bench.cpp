// Cost of reading GPU telemetry at an iteration boundary: one gpu_metrics read through the
// sysfs-root path (open/read/close + decode) against baselines measured in the same run: a
// memcpy of the table and the raw open/read/close alone. Tables: the real v1.3 and v2.2
// captures from tests/data/gpu_metrics and a kernel-style 3872-byte v1.8 table.
//
// The fixture lives in a temporary directory, so the read cost here is that of a page-cache
// file; on a real GPU the kernel adds the driver's side (amdgpu refreshes the SMU table at most
// every 5 ms, SMU_GPU_METRICS_CACHE_INTERVAL, and otherwise serves its cached copy). What this
// measures is the agent's own share.
//
// Usage: firmware_shim_bench [SOURCE_DIR] [ITERATIONS]
// SOURCE_DIR defaults to $SEQPOINT_SOURCE_DIR or the current directory. The cases of one table
// are measured back to back in each of 15 rounds (so machine noise hits them alike); the
// medians over rounds are printed, and the ratio is the median of the per-round ratios.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "firmware-shim/gpu_device.h"
#include "firmware-shim/gpu_metrics/gpu_metrics.h"
#include "firmware-shim/sysfs_file.h"

namespace {

namespace fs = std::filesystem;
using seqpoint::firmware::DecodeGpuMetrics;
using seqpoint::firmware::DiscoverGpus;
using seqpoint::firmware::GpuDevice;
using seqpoint::firmware::ReadFileBounded;
using seqpoint::firmware::SysfsRoot;

volatile uint64_t g_sink = 0;

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "firmware_shim_bench: cannot read %s (pass the source directory)\n",
                 path.c_str());
    std::exit(1);
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void Write(const std::string& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

constexpr int kReps = 15;

double NsPerCall(int iters, const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<uint8_t> KernelV18Table() {
  std::vector<uint8_t> t(3872, 0xFF);  // smu_cmn_init_soft_gpu_metrics fills with 0xFF
  t[0] = 3872 & 0xFF;
  t[1] = 3872 >> 8;
  t[2] = 1;
  t[3] = 8;
  t[10] = 200;  // curr_socket_power 200 W
  t[11] = 0;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("SEQPOINT_SOURCE_DIR");
  const std::string src = argc > 1 ? argv[1] : (env != nullptr ? env : ".");
  const int iters = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5000;

  char tmpl[] = "/tmp/seqpoint-fw-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string root = tmpl;
  struct Case {
    const char* name;
    std::vector<uint8_t> table;
  };
  std::vector<Case> cases = {
      {"v1.3 dGPU (120 B, MangoHud capture)",
       ReadAll(src + "/tests/data/gpu_metrics/mangohud_gpu_metrics.bin")},
      {"v2.2 APU (128 B, MangoHud capture)",
       ReadAll(src + "/tests/data/gpu_metrics/mangohud_gpu_metrics_apu.bin")},
      {"v1.8 MI300-class (3872 B, synthetic)", KernelV18Table()},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string dev = root + "/sys/class/drm/card" + std::to_string(i) + "/device";
    Write(dev + "/gpu_metrics", cases[i].table);
    Write(dev + "/hwmon/hwmon0/power1_average", {'3', '3', '0', '0', '0', '0', '0', '0', '\n'});
  }
  auto devices = DiscoverGpus(SysfsRoot(root));
  if (!devices.ok() || devices->size() != cases.size()) {
    std::fprintf(stderr, "firmware_shim_bench: fixture discovery failed\n");
    return 1;
  }

  std::printf("firmware_shim_bench: medians of %d rounds x %d calls, ns per call\n", kReps, iters);
  std::printf("%-38s %9s %9s %9s %11s %9s\n", "table", "memcpy", "raw read", "decode",
              "read+decode", "ratio");
  std::vector<uint8_t> copy(GpuDevice::kMetricsBufferBytes);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& table = cases[i].table;
    const GpuDevice& d = (*devices)[i];
    const std::string path = d.device_dir() + "/gpu_metrics";
    std::vector<double> memcpy_ns, raw_ns, decode_ns, full_ns, ratio;
    for (int r = 0; r < kReps; ++r) {
      memcpy_ns.push_back(NsPerCall(iters, [&] {
        std::memcpy(copy.data(), table.data(), table.size());
        g_sink = g_sink + copy[3];
      }));
      raw_ns.push_back(NsPerCall(iters, [&] {
        uint8_t buf[GpuDevice::kMetricsBufferBytes];
        auto n = ReadFileBounded(path, buf);
        g_sink = g_sink + (n.ok() ? *n : 0);
      }));
      decode_ns.push_back(NsPerCall(iters, [&] {
        auto m = DecodeGpuMetrics(table);
        g_sink = g_sink + (m.ok() ? m->structure_size : 0);
      }));
      full_ns.push_back(NsPerCall(iters, [&] {
        auto m = d.ReadGpuMetrics();
        g_sink = g_sink + (m.ok() ? m->structure_size : 0);
      }));
      ratio.push_back(full_ns.back() / raw_ns.back());
    }
    std::printf("%-38s %9.0f %9.0f %9.0f %11.0f %8.2fx\n", cases[i].name, Median(memcpy_ns),
                Median(raw_ns), Median(decode_ns), Median(full_ns), Median(ratio));
  }
  const GpuDevice& d0 = (*devices)[0];
  std::vector<double> all_ns;
  for (int r = 0; r < kReps; ++r) {
    all_ns.push_back(NsPerCall(iters / 10 + 1, [&] {
      auto w = d0.ReadAll().hwmon->power_average_w;
      g_sink = g_sink + (w ? 1 : 0);
    }));
  }
  const double power_ns = Median(all_ns);
  std::printf("ReadAll (gpu_metrics + hwmon + PCI ids) of card0: %.0f ns\n", power_ns);
  std::printf("ratio = read+decode / raw read: the decoder's share on top of the syscalls\n");
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
