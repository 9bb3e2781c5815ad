// See slow_rank.h.
#include "agent/fleet/slow_rank.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "agent/fleet/median.h"

namespace seqpoint::daemon::fleet {
namespace {

// Siegmund's approximation of the in-control mean run length of a one-sided CUSUM on unit
// normal values with reference k and threshold h.
double Arl0(double k, double h) {
  const double a = 2 * k * (h + 1.166);
  return (std::exp(a) - a - 1) / (2 * k * k);
}

// The per-step noise of x from first differences: a level shift moves one difference, not the
// median.
double StepSigma(const std::deque<double>& v) {
  std::vector<double> d;
  for (size_t i = 1; i < v.size(); ++i) d.push_back(std::fabs(v[i] - v[i - 1]));
  return 1.4826 * Median(std::move(d)) / std::sqrt(2.0);
}

// The long-run noise of x, scaled to one step, by overlapping batch means: the difference of the
// means of every two adjacent runs of `batch` values, whose spread is sqrt(2 / batch) times the
// long-run sigma; robust like StepSigma (a level shift moves at most 2 x batch - 1 of the
// N - 2 x batch + 1 differences of N values: fewer than half once N >= 6 x batch, which kWarmup
// is). 0 with fewer than 4 x batch values.
double LongRunSigma(const std::deque<double>& v, size_t batch) {
  if (v.size() < 4 * batch) return 0;
  std::vector<double> sums(v.size() + 1, 0);  // prefix sums
  for (size_t i = 0; i < v.size(); ++i) sums[i + 1] = sums[i] + v[i];
  std::vector<double> d;
  for (size_t i = 0; i + 2 * batch <= v.size(); ++i) {
    const double first = sums[i + batch] - sums[i], second = sums[i + 2 * batch] - sums[i + batch];
    d.push_back(std::fabs(second - first) / static_cast<double>(batch));
  }
  return 1.4826 * Median(std::move(d)) / std::sqrt(2.0) * std::sqrt(static_cast<double>(batch));
}

}  // namespace

double CusumThreshold(double k, double arl0) {
  double lo = 0, hi = 1;
  while (Arl0(k, hi) < arl0 && hi < 1e6) hi *= 2;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (Arl0(k, mid) < arl0 ? lo : hi) = mid;
  }
  return hi;
}

double CusumDelay(double mu, double k, double h, double cap) {
  const double drift = std::min(mu - k, cap), b = h + 1.166;
  if (std::fabs(drift) < 1e-9) return b * b;  // the limit of the formula below at drift 0
  const double a = 2 * drift * b;
  // Past about 700 the exponential overflows: the delay is astronomically long anyway.
  if (-a > 700) return std::numeric_limits<double>::infinity();
  return (std::exp(-a) + a - 1) / (2 * drift * drift);
}

double DetectionFloor(double sigma, double k, double h, double cap, double steps) {
  if (sigma <= 0) return 0;
  // The delay most slowdowns are found within (9 in 10): the mean plus 1.28 standard deviations
  // of the first passage of a random walk with drift d and unit variance over b (inverse
  // Gaussian: variance b / d^3).
  const double b = h + 1.166;
  auto delay = [&](double log_f) {
    const double drift = std::min(log_f / sigma - k, cap);
    if (drift <= 0) return std::numeric_limits<double>::infinity();
    return CusumDelay(log_f / sigma, k, h, cap) + 1.2816 * std::sqrt(b / (drift * drift * drift));
  };
  double lo = 0, hi = std::log(2.0);
  while (delay(hi) > steps) {
    if (hi > std::log(1e3)) return std::numeric_limits<double>::infinity();  // never
    hi *= 2;
  }
  for (int i = 0; i < 40; ++i) {
    const double mid = (lo + hi) / 2;
    (delay(mid) > steps ? lo : hi) = mid;
  }
  return std::exp(hi);
}

std::vector<int32_t> SlowRankTest::Step(uint64_t iter, const std::vector<RankCompute>& ranks) {
  std::vector<int32_t> raised;
  for (const RankCompute& r : ranks) ++seen_[r.rank];
  // log(compute per token) of each measured rank.
  std::vector<double> y(ranks.size(), 0);
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].compute_ns > 0 && ranks[i].tokens > 0) {
      y[i] =
          std::log(static_cast<double>(ranks[i].compute_ns) / static_cast<double>(ranks[i].tokens));
    }
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].compute_ns == 0 || ranks[i].tokens == 0) continue;
    std::vector<double> peers;
    const double t = static_cast<double>(ranks[i].tokens);
    for (size_t j = 0; j < ranks.size(); ++j) {
      if (j == i || ranks[j].compute_ns == 0 || ranks[j].tokens == 0) continue;
      if (std::fabs(static_cast<double>(ranks[j].tokens) / t - 1) > options_.match_tolerance) {
        continue;  // not at equal SL: says nothing about r's hardware
      }
      peers.push_back(y[j]);
    }
    if (!peers.empty()) Update(ranks[i].rank, iter, y[i] - Median(std::move(peers)), &raised);
  }
  return raised;
}

void SlowRankTest::Update(int32_t rank, uint64_t iter, double x, std::vector<int32_t>* raised) {
  SlowRankState& s = states_[rank];
  std::deque<double>& v = values_[rank];
  v.push_back(x);
  if (v.size() > kNoiseWindow) v.pop_front();
  ++s.tested;
  s.seen = seen_[rank];
  const size_t recent = std::min(v.size(), kWindow);
  double sum = 0;
  for (size_t i = v.size() - recent; i < v.size(); ++i) sum += v[i];
  s.ratio = std::exp(sum / static_cast<double>(recent));
  if (v.size() < kWarmup) return;
  s.sigma = std::max({LongRunSigma(v, kBatch), StepSigma(v), options_.min_sigma});
  const double delta = std::log1p(options_.min_slowdown);
  const double k = delta / (2 * s.sigma);
  s.threshold = CusumThreshold(k, options_.false_alarm_steps);
  // One step adds at most kHuber sigmas and at most 1/kMinSteps of h: a single stall (a
  // page-fault storm, a collector's pause, a heavy-tailed scheduler delay that the normal model
  // behind h does not know) neither raises the alarm alone nor dominates the sum. The cap is on
  // z - k, not z, so a slowdown of min_slowdown (z = 2k) still adds k on a quiet machine, where
  // k exceeds kHuber.
  const double step =
      std::min({x / s.sigma - k, kHuber, s.threshold / static_cast<double>(kMinSteps)});
  s.cusum = std::max(0.0, s.cusum + step);
  s.floor = DetectionFloor(s.sigma, k, s.threshold,
                           std::min(kHuber, s.threshold / static_cast<double>(kMinSteps)),
                           options_.floor_steps * static_cast<double>(s.tested) /
                               static_cast<double>(std::max(s.seen, s.tested)));
  if (!s.slow && s.cusum > s.threshold) {
    s.slow = true;
    ++s.alarms;
    s.alarm_step = iter;
    raised->push_back(rank);
  }
  if (s.slow) {
    s.cusum = std::min(s.cusum, 2 * s.threshold);
    if (s.cusum == 0) s.slow = false;
  }
}

}  // namespace seqpoint::daemon::fleet
