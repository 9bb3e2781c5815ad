// Cost of energy on every iteration and of the observer-effect estimate, against baselines
// measured in the same run: the energy source's own read (GpuMetricsEnergySource over the real
// RX 6900 XT table in a temporary sysfs, the page-cache cost of a gpu_metrics read + decode),
// then the sampler's tick (that read + the ring), the per-iteration interpolation over a full
// ring, and the observer-effect estimate of a run with 64 measured iterations (16 pairs).
// What the daemon spends per second at the default 50 ms interval is printed too.
//
// Usage: energy_sampler_bench [SOURCE_DIR] [ITERATIONS]. Medians over 15 rounds; each round
// measures every case back to back, so machine noise hits them alike.
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

#include "agent/energy/energy_sampler.h"
#include "agent/measure/observer_effect.h"
#include "collectors/energy/gpu_metrics_energy.h"

namespace {

namespace fs = std::filesystem;
using seqpoint::daemon::EnergySampler;

double NsPer(int n, const std::function<void()>& body) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) body();
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("SEQPOINT_SOURCE_DIR");
  const std::string source = argc > 1 ? argv[1] : env ? env : ".";
  const int n = argc > 2 ? std::atoi(argv[2]) : 2000;
  const fs::path root = fs::temp_directory_path() / ("energy_bench_" + std::to_string(getpid()));
  fs::create_directories(root / "sys/class/drm/card0/device");
  fs::copy_file(source + "/tests/data/gpu_metrics/amdgpu-sysfs-rs_rx6900xt.bin",
                root / "sys/class/drm/card0/device/gpu_metrics");
  const std::string sys = (root / "sys").string();

  seqpoint::collectors::GpuMetricsEnergySource raw(sys);
  if (!raw.Open().ok()) {
    std::fprintf(stderr, "energy_sampler_bench: cannot open the fixture under %s\n", sys.c_str());
    return 1;
  }
  // Virtual time: a tick every 50 ms, the read itself 1 us (a sampler reads the clock twice).
  uint64_t clock = 1'000'000'000;
  bool before_read = true;
  auto sampler = EnergySampler::OpenSource(
      std::make_unique<seqpoint::collectors::GpuMetricsEnergySource>(sys), [&] {
        before_read = !before_read;
        return clock += before_read ? 1'000 : 50'000'000;
      });
  if (!sampler.ok()) return 1;
  for (size_t i = 0; i < EnergySampler::kRingSamples; ++i) (*sampler)->Sample();  // full ring
  const uint64_t span = clock - 2'000'000'000;

  // 64 measured iterations, one control in four, times from a fixed pseudo-random stream.
  std::vector<seqpoint::daemon::MeasuredTiming> measured;
  uint64_t x = 12345;
  for (uint64_t i = 0; i < 64; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    measured.push_back({i * 3,
                        42,
                        static_cast<uint32_t>(8 << (i % 4)),
                        1e8 * (1 + double(x >> 40) / double(1ULL << 24)),
                        seqpoint::daemon::IsControlVisit(i, 4, 42),
                        {"perf#0"}});
  }

  std::vector<double> read, tick, between, observer;
  volatile double sink = 0;
  for (int round = 0; round < 15; ++round) {
    read.push_back(NsPer(n, [&] { sink = sink + *raw.ReadMicrojoules(); }));
    tick.push_back(NsPer(n, [&] { (*sampler)->Sample(); }));
    between.push_back(NsPer(n, [&] {
      const uint64_t b = clock - span / 2 + (x = x * 6364136223846793005ULL + 1) % 1'000'000'000;
      sink = sink + (*sampler)->EnergyBetween(b, b + 300'000'000).value_or(0);
    }));
    observer.push_back(NsPer(n / 10, [&] {
      auto pairs = seqpoint::daemon::PairControls(measured, [](uint32_t sl) { return 1e8 * sl; });
      sink = sink + seqpoint::daemon::EstimateObserverEffect(pairs, 0.05).all.ratio;
    }));
  }
  fs::remove_all(root);
  const double base = Median(read);
  std::printf("%-52s %10s %8s\n", "case (median of 15 rounds)", "ns", "x base");
  std::printf("%-52s %10.0f %8.2f\n", "gpu_metrics energy read (baseline)", base, 1.0);
  std::printf("%-52s %10.0f %8.2f\n", "sampler tick: read + ring", Median(tick),
              Median(tick) / base);
  std::printf("%-52s %10.0f %8.2f\n", "iteration energy: 2 interpolations in 8192 samples",
              Median(between), Median(between) / base);
  std::printf("%-52s %10.0f %8.2f\n", "observer-effect estimate, 64 measured (16 pairs)",
              Median(observer), Median(observer) / base);
  std::printf(
      "sampling at 50 ms while a run is watched: %.1f us of CPU per second (%.4f%% of a "
      "core)\n",
      20 * Median(tick) / 1e3, 20 * Median(tick) / 1e7);
  return 0;
}
