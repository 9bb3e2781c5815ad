// Cost of one measurement (Begin + End) of each collector available on this machine, in
// microseconds, against a baseline measured in the same run: a clock_gettime pair, the least a
// measurement can cost. Collectors are built through the registry, as the agent builds them.
//
// Cases (each skipped with the reason when not available here):
//   perf sw 1t / 8t    software events on a sleeping child with 1 and 8 threads
//   perf sw+hw 1t      + one hardware group (cycles, instructions, cache-references/misses)
//   rapl, energy       powercap fixture tree (real values) in a scratch directory
//   gpu_metrics        energy source over a real RX 6900 XT gpu_metrics table (firmware-shim)
//   nvml               NVML test double (dlopen): our wrapper's share, not a driver's
//   rocm_smi           real librocm_smi64 on the RX 6900 XT fixture in a private mount
//                      namespace (root only; run in a forked child)
// Fixture files are page-cache reads: on real hardware the driver's own cost comes on top.
//
// Usage: collectors_bench [SOURCE_DIR] [FAKE_NVML_SO] [PAIRS]
// Every case runs PAIRS (default 2000) Begin+End pairs per round, 11 rounds interleaved; the
// median per-pair time over rounds is printed with its ratio to the baseline's median.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectors/registry.h"

namespace {

namespace fs = std::filesystem;
using namespace seqpoint::collectors;

constexpr int kRounds = 11;

double NowNs() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A child that starts `threads - 1` extra threads and then sleeps; killed on destruction.
struct SleepingChild {
  pid_t pid = -1;
  explicit SleepingChild(int threads) {
    int ready[2];
    if (pipe(ready) != 0) return;
    pid = fork();
    if (pid == 0) {
      for (int i = 1; i < threads; ++i) {
        pthread_t t;
        pthread_create(
            &t, nullptr,
            [](void*) -> void* {
              for (;;) pause();
            },
            nullptr);
      }
      char c = 'r';
      if (write(ready[1], &c, 1) != 1) _exit(1);
      for (;;) pause();
    }
    char c;
    if (read(ready[0], &c, 1) != 1) pid = -1;
    close(ready[0]);
    close(ready[1]);
  }
  ~SleepingChild() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

struct Case {
  std::string name;
  std::function<bool(int pairs, double* ns_per_pair)> run;  // false: failed this round
  std::vector<double> per_round;
  std::string skipped;
};

// A case over an opened collector: Begin+End pairs.
Case CollectorCase(std::string name, std::shared_ptr<Collector> c) {
  return {std::move(name),
          [c](int pairs, double* ns) {
            const double t0 = NowNs();
            for (int i = 0; i < pairs; ++i) {
              if (!c->Begin().ok() || !c->End().ok()) return false;
            }
            *ns = (NowNs() - t0) / pairs;
            return true;
          },
          {},
          {}};
}

Case Skipped(std::string name, std::string why) {
  Case c{std::move(name), nullptr, {}, std::move(why)};
  return c;
}

const CollectorInfo& Info(std::string_view name) {
  for (const CollectorInfo& i : CollectorRegistry()) {
    if (i.name == name) return i;
  }
  std::fprintf(stderr, "collectors_bench: no collector %.*s\n", int(name.size()), name.data());
  std::exit(1);
}

Case Opened(std::string label, std::string_view name, const CollectorConfig& config,
            const Target& target) {
  std::shared_ptr<Collector> c = Info(name).factory(config);
  seqpoint::Status s = c->Open(target);
  if (!s.ok()) return Skipped(std::move(label), s.ToString());
  return CollectorCase(std::move(label), c);
}

// ROCm SMI needs its fake /sys/class in a private mount namespace: measured in a forked child
// that unshares, mounts, measures and writes the median per-pair ns to a pipe.
Case RocmSmiCase(const std::string& class_dir, int pairs) {
  if (geteuid() != 0) return Skipped("rocm_smi", "needs root (mount namespace)");
  int out[2];
  if (pipe(out) != 0) return Skipped("rocm_smi", "pipe failed");
  pid_t pid = fork();
  if (pid == 0) {
    double result = -1;
    if (unshare(CLONE_NEWNS) == 0 &&
        mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
        mount(class_dir.c_str(), "/sys/class", nullptr, MS_BIND | MS_REC, nullptr) == 0 &&
        mount("tmpfs", "/dev/shm", "tmpfs", 0, nullptr) == 0) {
      CollectorConfig config;
      std::unique_ptr<Collector> c = Info("rocm_smi").factory(config);
      if (c->Open({0, ""}).ok()) {
        std::vector<double> rounds;
        for (int r = 0; r < kRounds; ++r) {
          const double t0 = NowNs();
          for (int i = 0; i < pairs; ++i) {
            (void)c->Begin();
            (void)c->End();
          }
          rounds.push_back((NowNs() - t0) / pairs);
        }
        result = Median(rounds);
      }
    }
    if (write(out[1], &result, sizeof result) != sizeof result) _exit(1);
    _exit(0);
  }
  close(out[1]);
  double result = -1;
  if (read(out[0], &result, sizeof result) != sizeof result) result = -1;
  close(out[0]);
  waitpid(pid, nullptr, 0);
  if (result < 0) return Skipped("rocm_smi", "could not set up the namespace or open ROCm SMI");
  Case c{"rocm_smi", nullptr, {}, {}};
  c.per_round.assign(1, result);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env_src = std::getenv("SEQPOINT_SOURCE_DIR");
  const std::string src = argc > 1 ? argv[1] : (env_src ? env_src : ".");
  const std::string fake_nvml = argc > 2 ? argv[2] : "";
  const int pairs = argc > 3 ? std::max(1, std::atoi(argv[3])) : 2000;
  if (!fs::exists(src + "/collectors/energy/testdata/powercap")) {
    std::fprintf(stderr, "collectors_bench: pass the source directory (fixtures not found in %s)\n",
                 src.c_str());
    return 1;
  }

  // Scratch /sys with the powercap fixture and the RX 6900 XT gpu_metrics table.
  char tmpl[] = "/tmp/seqpoint-collectors-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string sys = std::string(tmpl) + "/sys";
  fs::create_directories(sys + "/class/drm/card0/device");
  fs::copy(src + "/collectors/energy/testdata/powercap/class", sys + "/class",
           fs::copy_options::recursive);
  fs::copy_file(src + "/tests/data/gpu_metrics/amdgpu-sysfs-rs_rx6900xt.bin",
                sys + "/class/drm/card0/device/gpu_metrics");

  SleepingChild one(1), eight(8);
  CollectorConfig sw;
  sw.perf.events = {"task-clock", "page-faults", "context-switches", "cpu-migrations"};
  CollectorConfig hw = sw;
  hw.perf.events.insert(hw.perf.events.end(),
                        {"cycles", "instructions", "cache-references", "cache-misses"});
  hw.perf.pmu_trap_check = false;  // the cost of hardware groups themselves, even where they trap
  CollectorConfig fixture;
  fixture.sysfs_root = sys;
  fixture.nvml.library = "/nonexistent";
  CollectorConfig energy_rapl = fixture;
  energy_rapl.energy.sources = {"rapl"};
  CollectorConfig energy_gpu = fixture;
  energy_gpu.energy.sources = {"gpu_metrics"};
  CollectorConfig nvml;
  nvml.nvml.library = fake_nvml.empty() ? "/nonexistent" : fake_nvml;

  std::vector<Case> cases;
  cases.push_back({"baseline: clock_gettime pair",
                   [](int n, double* ns) {
                     timespec a, b;
                     const double t0 = NowNs();
                     for (int i = 0; i < n; ++i) {
                       clock_gettime(CLOCK_MONOTONIC, &a);
                       clock_gettime(CLOCK_MONOTONIC, &b);
                     }
                     *ns = (NowNs() - t0) / n;
                     return a.tv_nsec != -1 && b.tv_nsec != -1;
                   },
                   {},
                   {}});
  cases.push_back(Opened("perf sw, 1 thread", "perf", sw, {one.pid, ""}));
  cases.push_back(Opened("perf sw, 8 threads", "perf", sw, {eight.pid, ""}));
  cases.push_back(Opened("perf sw+hw, 1 thread", "perf", hw, {one.pid, ""}));
  cases.push_back(Opened("perf sw+hw, 8 threads", "perf", hw, {eight.pid, ""}));
  cases.push_back(Opened("rapl (fixture)", "rapl", fixture, {0, ""}));
  cases.push_back(Opened("energy via rapl (fixture)", "energy", energy_rapl, {0, ""}));
  cases.push_back(Opened("energy via gpu_metrics (fixture)", "energy", energy_gpu, {0, ""}));
  cases.push_back(Opened("nvml (test double)", "nvml", nvml, {0, ""}));

  for (int r = 0; r < kRounds; ++r) {
    for (Case& c : cases) {
      double ns = 0;
      if (c.run && c.run(pairs, &ns)) c.per_round.push_back(ns);
    }
  }
  cases.push_back(
      RocmSmiCase(src + "/collectors/rocm_smi/testdata/rx6900xt/class", std::max(1, pairs / 10)));

  const double base = Median(cases[0].per_round);
  std::printf("collectors_bench: Begin+End per measurement, median of %d rounds x %d pairs\n",
              kRounds, pairs);
  std::printf("%-36s %12s %10s\n", "case", "us/pair", "x baseline");
  for (const Case& c : cases) {
    if (c.per_round.empty()) {
      std::printf("%-36s %12s   skipped: %s\n", c.name.c_str(), "-",
                  c.skipped.empty() ? "failed" : c.skipped.c_str());
      continue;
    }
    const double med = Median(c.per_round);
    std::printf("%-36s %12.3f %10.1f\n", c.name.c_str(), med / 1000.0, med / base);
  }
  std::error_code ec;
  fs::remove_all(tmpl, ec);
  return 0;
}
