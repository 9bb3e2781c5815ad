// Synthetic runs for the selector's tests: SL sequences shaped like real bucketed training
// (a skewed length distribution, repeated SLs), and a metric that follows the cost model with
// multiplicative noise. Deterministic for a seed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "selector/projection.h"
#include "selector/sl_histogram.h"

namespace seqpoint::selector::testing {

struct Run {
  std::vector<uint32_t> seq_len;
  std::vector<uint32_t> batch;
  std::vector<double> time;  // the metric
  double total = 0;
};

// Log-normal SLs in [1, max_sl]; time = (c0 + c1*L*B + c2*L^2*B) * (1 + noise*N(0,1)).
inline Run MakeRun(size_t n, uint64_t seed, double noise = 0.05, double c2 = 0.0,
                   uint32_t max_sl = 120, uint32_t batch = 64) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> len(std::log(20.0), 0.6);
  std::normal_distribution<double> z(0, 1);
  Run r;
  for (size_t i = 0; i < n; ++i) {
    uint32_t sl = static_cast<uint32_t>(std::clamp(std::round(len(rng)), 1.0, double(max_sl)));
    double work = 2e5 + 1e3 * sl * batch + c2 * sl * sl * batch;
    double t = work * std::max(0.2, 1 + noise * z(rng));
    r.seq_len.push_back(sl);
    r.batch.push_back(batch);
    r.time.push_back(t);
    r.total += t;
  }
  return r;
}

// The observations a selection would collect on `r`: each point's iterations' (cost, time).
inline std::vector<std::vector<Observation>> ObservationsOf(const Run& r, const Selection& s) {
  std::vector<std::vector<Observation>> obs;
  for (const auto& p : s.points) {
    obs.emplace_back();
    for (uint64_t it : p.iters) obs.back().push_back({CostProxy(r.seq_len[it], r.batch[it]), r.time[it]});
  }
  return obs;
}

}  // namespace seqpoint::selector::testing
