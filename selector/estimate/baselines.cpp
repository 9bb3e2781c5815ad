#include "selector/estimate/baselines.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_set>
#include <vector>

namespace seqpoint::selector {
namespace {

template <typename IndexFn>
double ScaledMean(std::span<const double> values, uint64_t n, IndexFn index_of) {
  double sum = 0;
  uint64_t have = 0;
  for (uint64_t j = 0; j < n; ++j) {
    double v = values[index_of(j)];
    if (std::isnan(v)) continue;
    sum += v;
    ++have;
  }
  if (have == 0) return NAN;
  return sum / static_cast<double>(have) * static_cast<double>(values.size());
}

}  // namespace

double ProjectFirstN(std::span<const double> values, uint64_t n) {
  n = std::min<uint64_t>(n, values.size());
  return ScaledMean(values, n, [](uint64_t j) { return j; });
}

double ProjectUniformStride(std::span<const double> values, uint64_t n) {
  n = std::min<uint64_t>(n, values.size());
  const double step =
      static_cast<double>(values.size()) / static_cast<double>(std::max<uint64_t>(n, 1));
  return ScaledMean(values, n, [&](uint64_t j) {
    return std::min<uint64_t>(values.size() - 1,
                              static_cast<uint64_t>((static_cast<double>(j) + 0.5) * step));
  });
}

double ProjectRandom(std::span<const double> values, uint64_t n, uint64_t seed) {
  n = std::min<uint64_t>(n, values.size());
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> pick(0, values.size() - 1);
  std::unordered_set<uint64_t> chosen;
  std::vector<uint64_t> order;
  while (order.size() < n) {
    uint64_t i = pick(rng);
    if (chosen.insert(i).second) order.push_back(i);
  }
  return ScaledMean(values, n, [&](uint64_t j) { return order[j]; });
}

double MedianRandomErrorPct(std::span<const double> values, uint64_t n, double actual, int draws) {
  std::vector<double> errs;
  for (int d = 0; d < draws; ++d) {
    double p = ProjectRandom(values, n, 0x5eed0000u + static_cast<uint64_t>(d));
    if (!std::isnan(p)) errs.push_back(std::fabs(p - actual) / std::fabs(actual) * 100.0);
  }
  if (errs.empty()) return NAN;
  std::nth_element(errs.begin(), errs.begin() + errs.size() / 2, errs.end());
  return errs[errs.size() / 2];
}

}  // namespace seqpoint::selector
