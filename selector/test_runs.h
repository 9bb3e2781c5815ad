// Synthetic runs for the selector's tests: SL sequences shaped like real bucketed training
// (a skewed length distribution, repeated SLs), and a metric that follows the cost model with
// multiplicative noise; the same with a warm-up and a slowdown, fed to the online selector as
// seqpointd feeds it. Deterministic for a seed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "selector/estimate/projection.h"
#include "selector/estimate/stratified_projection.h"
#include "selector/online_selector.h"
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
    for (uint64_t it : p.iters)
      obs.back().push_back({CostProxy(r.seq_len[it], r.batch[it]), r.time[it]});
  }
  return obs;
}

// A run with a warm-up (the first `warmup` iterations `warm_factor` slower, fading out) and,
// from `slow_at` on, iterations `slow_factor` slower in time while their work (the "counter",
// e.g. CPU time) stays as it was: a process sharing the CPU.
struct DriftRun {
  Run run;
  std::vector<double> work;
};
inline DriftRun MakeDriftRun(size_t n, uint64_t seed, size_t warmup, double warm_factor,
                             size_t slow_at, double slow_factor) {
  DriftRun d;
  d.run = MakeRun(n, seed, 0.05);
  d.work = d.run.time;
  d.run.total = 0;
  for (size_t i = 0; i < n; ++i) {
    double f = 1;
    if (i < warmup) {
      f *= 1 + (warm_factor - 1) * (1 - static_cast<double>(i) / static_cast<double>(warmup));
    }
    if (i >= slow_at) f *= slow_factor;
    d.run.time[i] *= f;
    d.run.total += d.run.time[i];
  }
  return d;
}

struct Online {
  OnlineSelector sel;
  std::vector<StrataSample> time_samples, work_samples;
};

inline Online RunOnline(const DriftRun& d, uint32_t per_doubling = 16) {
  OnlineOptions o;
  o.per_doubling = per_doubling;
  o.warmup = 0;
  Online out{*OnlineSelector::Create(o), {}, {}};
  const Run& r = d.run;
  for (size_t i = 0; i < r.seq_len.size(); ++i) {
    Decision dec = out.sel.OnIteration(i, r.seq_len[i], r.batch[i], 0);
    out.sel.OnTime(i, r.seq_len[i], r.batch[i], r.time[i]);
    if (dec.measure) {
      const double cost = CostProxy(r.seq_len[i], r.batch[i]);
      out.time_samples.push_back({i, r.seq_len[i], cost, r.time[i], r.time[i]});
      out.work_samples.push_back({i, r.seq_len[i], cost, r.time[i], d.work[i]});
    }
  }
  return out;
}

inline double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

inline const TimeChange* FirstSlower(const TimeStrata& t) {
  for (const TimeChange& c : t.changes()) {
    if (c.direction == 1) return &c;
  }
  return nullptr;
}

}  // namespace seqpoint::selector::testing
