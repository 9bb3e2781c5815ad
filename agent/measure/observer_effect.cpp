#include "agent/measure/observer_effect.h"

#include <algorithm>
#include <boost/math/special_functions/beta.hpp>
#include <cmath>
#include <map>
#include <set>

#include "common/splitmix.h"

namespace seqpoint::daemon {
namespace {

// P(Binomial(n, 1/2) = i), in log space.
double BinomialHalfLogPmf(size_t n, size_t i) {
  return std::lgamma(double(n) + 1) - std::lgamma(double(i) + 1) - std::lgamma(double(n - i) + 1) -
         double(n) * std::log(2.0);
}

}  // namespace

std::string GroupKey(const std::string& collector, uint64_t group) {
  return collector + "#" + std::to_string(group);
}

std::string CollectorOfKey(const std::string& key) { return key.substr(0, key.rfind('#')); }

bool IsControlVisit(uint64_t visit, uint32_t every, uint64_t salt) {
  if (every < 2) return false;
  const uint64_t block = visit / every;
  return visit % every == SplitMix64(block * 0x100000001b3ULL ^ salt) % every;
}

ObserverEstimate EstimateRatio(std::vector<double> r) {
  ObserverEstimate e;
  std::erase_if(r, [](double v) { return !std::isfinite(v) || v <= 0; });
  e.pairs = r.size();
  if (r.empty()) return e;
  std::sort(r.begin(), r.end());
  const size_t n = r.size();
  e.ratio = n % 2 ? r[n / 2] : 0.5 * (r[n / 2 - 1] + r[n / 2]);
  // [x_(k), x_(n+1-k)] (1-based) covers the median with probability 1 - 2 P(B <= k-1),
  // B ~ Binomial(n, 1/2): the largest k with P(B <= k-1) <= 2.5% (at least 1).
  // The CDF grows term by term: one lgamma triple per k, not a sum from 0 for each.
  size_t k = 1;
  double cdf = std::exp(BinomialHalfLogPmf(n, 0));
  while (k < n / 2) {
    cdf += std::exp(BinomialHalfLogPmf(n, k));  // now P(B <= k)
    if (cdf > 0.025) break;
    ++k;
  }
  e.low = r[k - 1];
  e.high = r[n - k];
  e.valid = n >= kObserverMinPairs;
  return e;
}

double SignTestEvidence(uint64_t above, uint64_t n) {
  if (n == 0) return 1;
  const double s = double(above) + 1, f = double(n - above) + 1;
  // integral_{1/2}^{1} p^S (1-p)^F dp = B(S+1, F+1) * P(Beta(S+1, F+1) > 1/2).
  const double tail = boost::math::ibetac(s, f, 0.5);
  if (!(tail > 0)) return 0;
  const double log_e = (double(n) + 1) * std::log(2.0) + std::lgamma(s) + std::lgamma(f) -
                       std::lgamma(s + f) + std::log(tail);
  return std::exp(std::min(log_e, 700.0));
}

ObserverEffect EstimateObserverEffect(const std::vector<ObserverPair>& pairs, double threshold) {
  ObserverEffect out;
  out.threshold = threshold;
  std::vector<double> all;
  std::map<std::string, std::vector<double>> by_group;
  for (const ObserverPair& p : pairs) {
    if (!(p.treated > 0) || !(p.control > 0)) continue;
    const double r = p.treated / p.control;
    all.push_back(r);
    for (const std::string& g : p.groups) by_group[g].push_back(r);
  }
  // Bonferroni over "all" and every group key: the run's family-wise bound is kObserverAlpha.
  const double alpha = kObserverAlpha / double(1 + by_group.size());
  // The evidence is followed pair by pair, in the order given, and its highest value kept: a
  // flag is raised the first time it crosses 1/alpha, as the live looks would have raised it,
  // so a run rebuilt from the store gets the verdict it had (Ville's bound covers every prefix).
  auto judge = [threshold, alpha](ObserverEstimate& e, const std::vector<double>& ratios) {
    uint64_t n = 0;
    e.evidence = 1;
    for (double r : ratios) {
      if (!std::isfinite(r) || !(r > 0)) continue;
      ++n;
      if (!(r > 1 + threshold)) continue;
      ++e.above;  // the evidence can only have risen with this pair: look now
      if (e.evidence < 1 / alpha) e.evidence = std::max(e.evidence, SignTestEvidence(e.above, n));
    }
    e.alpha = alpha;
    e.flagged = e.evidence >= 1 / alpha;
  };
  out.all = EstimateRatio(all);
  judge(out.all, all);
  out.flagged = out.all.flagged;
  for (auto& [group, ratios] : by_group) {
    ObserverEstimate e = EstimateRatio(ratios);
    e.group = group;
    judge(e, ratios);
    out.flagged = out.flagged || e.flagged;
    out.by_group.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> ObserverEffect::FlaggedCollectors() const {
  std::set<std::string> out;
  for (const ObserverEstimate& e : by_group) {
    if (e.flagged) out.insert(CollectorOfKey(e.group));
  }
  if (out.empty() && all.flagged) {
    for (const ObserverEstimate& e : by_group) out.insert(CollectorOfKey(e.group));
  }
  return {out.begin(), out.end()};
}

const ObserverEstimate* ObserverEffect::SlowdownOf(const std::vector<std::string>& groups) const {
  if (!flagged || groups.empty()) return nullptr;  // no collector ran on it
  const ObserverEstimate* worst = nullptr;
  bool any_group_flagged = false;
  for (const ObserverEstimate& e : by_group) {
    if (!e.flagged) continue;
    any_group_flagged = true;
    if (std::find(groups.begin(), groups.end(), e.group) == groups.end()) continue;
    if (worst == nullptr || e.ratio > worst->ratio) worst = &e;
  }
  if (!any_group_flagged) return &all;  // only the overall estimate: every treated iteration
  return worst;
}

std::vector<ObserverPair> PairControls(std::vector<MeasuredTiming> measured,
                                       const std::function<double(uint32_t)>& ref) {
  // A chosen iteration that no collector touched and that is not a control (chosen at its end,
  // before begin hooks were armed for its SL) is neither treated nor a random control: out.
  std::erase_if(measured, [&](const MeasuredTiming& m) {
    return !(m.time_ns > 0) || !(ref(m.seq_len) > 0) || (!m.control && m.groups.empty());
  });
  std::sort(measured.begin(), measured.end(), [](const auto& a, const auto& b) {
    return a.pid != b.pid ? a.pid < b.pid : a.ordinal < b.ordinal;
  });
  std::vector<bool> used(measured.size(), false);
  std::vector<ObserverPair> out;
  for (size_t c = 0; c < measured.size(); ++c) {
    if (!measured[c].control) continue;
    // The nearest unpaired treated iteration of the same process, on either side.
    size_t best = measured.size();
    uint64_t best_gap = UINT64_MAX;
    for (int dir : {-1, 1}) {
      for (size_t i = c; dir < 0 ? i-- > 0 : ++i < measured.size();) {
        if (measured[i].pid != measured[c].pid) break;
        if (measured[i].control || used[i]) continue;
        const uint64_t gap = measured[i].ordinal > measured[c].ordinal
                                 ? measured[i].ordinal - measured[c].ordinal
                                 : measured[c].ordinal - measured[i].ordinal;
        if (gap < best_gap) {
          best_gap = gap;
          best = i;
        }
        break;
      }
    }
    if (best == measured.size()) continue;
    used[best] = true;
    const MeasuredTiming& t = measured[best];
    out.push_back(
        {t.time_ns / ref(t.seq_len), measured[c].time_ns / ref(measured[c].seq_len), t.groups});
  }
  return out;
}

std::vector<MeasuredTiming> TimingsFrom(const std::vector<Measurement>& measurements) {
  std::map<uint64_t, MeasuredTiming> by_ordinal;
  for (const Measurement& m : measurements) {
    MeasuredTiming& t = by_ordinal[m.ordinal];
    t.ordinal = m.ordinal;
    t.pid = m.pid;
    t.seq_len = m.seq_len;
    if (m.metric == "time_ns") t.time_ns = m.value;
    if (m.metric == "observer:control") t.control = m.value != 0;
    if (m.metric.rfind("group:", 0) == 0) {
      t.groups.push_back(GroupKey(m.metric.substr(6), static_cast<uint64_t>(m.value)));
    }
  }
  std::vector<MeasuredTiming> out;
  for (auto& [ordinal, t] : by_ordinal) out.push_back(std::move(t));
  return out;
}

}  // namespace seqpoint::daemon
