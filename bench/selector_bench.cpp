// Selector costs: ingest rate (events/s on one core) of the streaming histogram and of the
// online selector, against a baseline loop that only sums the SLs (memory traffic alone);
// offline selection time and memory for 10^6 and 10^7 iterations.
// Times are the thread's CPU time, not wall time: the cost on one core, and the same figure on
// a machine busy with other work (this project's 2-core VM often runs builds beside it).
// Usage: selector_bench [--iterations N]   (default runs 10^6 and 10^7)
#include <sys/resource.h>
#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "selector/estimate/stratified_projection.h"
#include "selector/offline_selector.h"
#include "selector/online_selector.h"

using namespace seqpoint::selector;

namespace {

// The calling thread's CPU time.
struct Clock {
  using time_point = double;
  static double now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
};

double Seconds(Clock::time_point a) { return Clock::now() - a; }

long MaxRssKiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

std::vector<uint32_t> MakeSls(size_t n) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> len(std::log(20.0), 0.6);
  std::vector<uint32_t> v(n);
  for (auto& sl : v) sl = static_cast<uint32_t>(std::min(200.0, std::max(1.0, std::round(len(rng)))));
  return v;
}

void RunSize(size_t n) {
  const std::vector<uint32_t> sl = MakeSls(n);
  std::printf("== %zu iterations ==\n", n);

  auto t0 = Clock::now();
  volatile uint64_t sink = 0;
  uint64_t acc = 0;
  for (uint32_t s : sl) acc += s;
  sink = acc;
  (void)sink;
  double base = Seconds(t0);

  t0 = Clock::now();
  SlHistogram h;
  for (size_t i = 0; i < n; ++i) h.Add(sl[i], CostProxy(sl[i], 64), sl[i] * 50.0, i >= 10);
  double hist = Seconds(t0);

  OnlineOptions oo;
  oo.budget_fraction = 1.0 / 200;
  auto online = OnlineSelector::Create(oo);
  t0 = Clock::now();
  for (size_t i = 0; i < n; ++i) online->OnIteration(i, sl[i], 64, sl[i] * 50.0);
  double on = Seconds(t0);
  t0 = Clock::now();
  Selection on_sel = online->Current();
  double on_finish = Seconds(t0);

  // As seqpointd runs it: paced budget, every iteration's time fed to the time strata.
  OnlineOptions po;
  po.per_doubling = 16;
  auto paced = OnlineSelector::Create(po);
  std::vector<double> times(n);
  for (size_t i = 0; i < n; ++i) times[i] = (2e5 + 1e3 * sl[i] * 64) * (1 + 0.03 * ((i * 7919) % 13) / 13.0);
  t0 = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    paced->OnIteration(i, sl[i], 64, sl[i] * 50.0);
    paced->OnTime(i, sl[i], 64, times[i]);
  }
  double paced_s = Seconds(t0);
  t0 = Clock::now();
  std::vector<StrataSample> samples;
  for (const auto& smp : paced->samples()) {
    samples.push_back({smp.iter, smp.seq_len, CostProxy(smp.seq_len, 64), times[smp.iter], times[smp.iter] * 0.7});
  }
  Selection paced_sel = paced->Current();
  auto strat = ProjectStratified(paced->strata(), paced_sel, samples, Auxiliary::kTime);
  double project_s = Seconds(t0);

  t0 = Clock::now();
  OfflineOptions off;
  off.budget = n / 200;
  auto plan = PlanOffline(h, off);
  OccurrencePicker picker(*plan);
  for (size_t i = 0; i < n; ++i) picker.Observe(i, i, sl[i]);
  auto sel = picker.Finish();
  double offline = Seconds(t0);

  std::printf("baseline loop (sum of SLs)     %8.1f M events/s\n", n / base / 1e6);
  std::printf("histogram ingest               %8.1f M events/s  (%.2fx baseline time)\n", n / hist / 1e6,
              hist / base);
  std::printf("online selector ingest         %8.1f M events/s  (%.2fx baseline time), %llu re-bins, "
              "%zu points, %llu measured\n",
              n / on / 1e6, on / base, static_cast<unsigned long long>(online->rebins()),
              on_sel.points.size(), static_cast<unsigned long long>(on_sel.measured()));
  std::printf("online Current()               %8.3f ms\n", on_finish * 1e3);
  std::printf("paced + time strata ingest     %8.1f M events/s  (OnIteration + OnTime, %.2fx "
              "baseline time), %zu measured, %zu strata, %zu changes, %.1f KiB\n",
              n / paced_s / 1e6, paced_s / base, paced->samples().size(),
              paced->strata().Strata().size(), paced->strata().changes().size(),
              paced->MemoryBytes() / 1024.0);
  std::printf("stratified projection          %8.3f ms (%s)\n", project_s * 1e3,
              strat.ok() ? "ok" : strat.status().message().c_str());
  std::printf("offline plan + pick (pass 2)   %8.3f s, %zu points, %llu measured\n", offline,
              sel->points.size(), static_cast<unsigned long long>(sel->measured()));
  std::printf("selector memory: histogram %.1f KiB, online selector %.1f KiB (input SLs %.1f MiB "
              "are the benchmark's, not the selector's)\n",
              h.MemoryBytes() / 1024.0, online->MemoryBytes() / 1024.0, n * 4 / 1048576.0);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {1'000'000, 10'000'000};
  if (argc == 3 && std::strcmp(argv[1], "--iterations") == 0) sizes = {std::stoul(argv[2])};
  for (size_t n : sizes) RunSize(n);
  std::printf("max RSS of the process: %.1f MiB\n", MaxRssKiB() / 1024.0);
  return 0;
}
