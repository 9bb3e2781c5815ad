// Cost of one recompute of a run's projections on seqpointd's loop (issue: nothing heavy on
// the loop): a run with many SLs and strata, 20 counter metrics, each projected with its
// interval (jackknife, auxiliary check) as RunTracker::Recompute does. CPU time of this
// thread, median of 5 recomputes. Build the same file against an older selector to compare.
// Usage: projection_bench [ITERATIONS] [DISTINCT_SLS]
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "selector/estimate/stratified_projection.h"
#include "selector/online_selector.h"

using namespace seqpoint::selector;

namespace {
double Now() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? std::stoull(argv[1]) : 200000;
  const uint32_t sls = argc > 2 ? static_cast<uint32_t>(std::stoul(argv[2])) : 2000;
  OnlineOptions o;
  o.per_doubling = 16;
  o.warmup = 0;
  auto sel = OnlineSelector::Create(o);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<uint32_t> sl(1, sls);
  std::normal_distribution<double> z(0, 0.05);
  std::vector<StrataSample> base;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t s = sl(rng);
    // A slowdown every eighth of the run: strata keep being opened.
    const double level = 1 + 0.3 * static_cast<double>((i * 8 / n) % 2);
    const double t = (2e5 + 1e3 * s) * level * (1 + z(rng));
    const Decision d = sel->OnIteration(i, s, 1, 0);
    sel->OnTime(i, s, 1, t);
    if (d.measure) base.push_back({i, s, CostProxy(s, 1), t, t / level});
  }
  const Selection cur = sel->Current();
  constexpr int kMetrics = 20;
  std::vector<double> times;
  double sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = Now();
#ifdef SEQPOINT_HAVE_PROJECTION_FRAME
    const ProjectionFrame frame(sel->strata(), cur);
#endif
    for (int m = 0; m < kMetrics; ++m) {
      std::vector<StrataSample> s = base;
      for (auto& x : s) x.value *= 1 + 0.01 * m;
#ifdef SEQPOINT_HAVE_PROJECTION_FRAME
      auto p = ProjectStratified(frame, s, m == 0 ? Auxiliary::kCost : Auxiliary::kTime);
#else
      auto p =
          ProjectStratified(sel->strata(), cur, s, m == 0 ? Auxiliary::kCost : Auxiliary::kTime);
#endif
      if (p.ok()) sink += p->whole.total;
    }
    times.push_back(Now() - t0);
  }
  std::sort(times.begin(), times.end());
  size_t cells = sel->strata().Cells().size();
  std::printf(
      "iterations %llu, distinct SLs %u, strata %zu, strata cells %zu, bins %zu, samples %zu, "
      "metrics %d: one recompute %.1f ms CPU (median of 5)%s\n",
      static_cast<unsigned long long>(n), sls, sel->strata().Strata().size(), cells,
      cur.points.size(), base.size(), kMetrics, times[2] * 1e3, sink > 0 ? "" : " ?");
  return 0;
}
