// One recorded run through the whole-run estimator (selector/estimate/whole_run_estimator.h),
// with the daemon's own choice of measured iterations when it is given: why a live projection
// missed its interval can then be read off the strata it stood on. bench/interval_coverage.py
// --live runs it on the true-numbers harness's outputs (bench/true_numbers.py).
//
// Usage: interval_coverage_replay TRACE [--measured FILE] [--per-doubling N] [--strata]
//   TRACE     a trace CSV (docs/trace-csv.md) with time_ns and any other metric columns
//   FILE      the iterations seqpointd measured, one per line: "ordinal[,kind]" where kind is
//             "control" (observer-effect control: time only) or "flagged" (the probes left its
//             counters out: time only); without it the selector chooses, as `evaluate --online`
// Prints one JSON object: per metric the projection, its interval, the actual total, whether
// it covers, and the reliability verdict; the measured iterations' ordinals
// ("measured_ordinals": which samples a projection stood on); with --strata, each time
// stratum's iterations, samples and mean time.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "common/trace_csv.h"
#include "selector/estimate/whole_run_estimator.h"
#include "selector/online_selector.h"

using namespace seqpoint;
using namespace seqpoint::selector;

namespace {

enum class Forced { kFull, kTimeOnly };

// A JSON number, or null where it is not finite (an unbounded high, a column never filled).
std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

int Usage() {
  std::fprintf(stderr,
               "usage: interval_coverage_replay TRACE [--measured FILE] [--per-doubling N] "
               "[--strata]\n");
  return 2;
}

bool ReadForced(const std::string& path, std::map<uint64_t, Forced>* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t comma = line.find(',');
    const uint64_t ordinal = std::stoull(line.substr(0, comma));
    const std::string kind = comma == std::string::npos ? "" : line.substr(comma + 1);
    (*out)[ordinal] = kind.empty() || kind == "measured" ? Forced::kFull : Forced::kTimeOnly;
  }
  return true;
}

// The selection's bins with the forced iterations filed in them (by SL, as the daemon's
// selector files its samples).
void Refile(Selection& sel, const Trace& t, const std::map<uint64_t, Forced>& forced) {
  for (SeqPoint& p : sel.points) p.iters.clear();
  if (sel.points.empty()) return;
  for (size_t i = 0; i < t.rows(); ++i) {
    if (!forced.count(t.iter[i])) continue;
    const uint32_t sl = t.seq_len[i];
    size_t best = 0;
    for (size_t p = 0; p < sel.points.size(); ++p) {
      if (sl >= sel.points[p].bin_lo && sl <= sel.points[p].bin_hi) {
        best = p;
        break;
      }
      if (sl > sel.points[p].bin_hi) best = p;
    }
    sel.points[best].iters.push_back(t.iter[i]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string trace_path = argv[1];
  std::string measured_path;
  bool show_strata = false;
  OnlineOptions o;
  o.per_doubling = 16;
  o.warmup = 0;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--measured") && i + 1 < argc) {
      measured_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--per-doubling") && i + 1 < argc) {
      o.per_doubling = std::stoull(argv[++i]);
    } else if (!std::strcmp(argv[i], "--strata")) {
      show_strata = true;
    } else {
      return Usage();
    }
  }
  auto trace = LoadTrace(trace_path);
  if (!trace.ok()) {
    std::fprintf(stderr, "interval_coverage_replay: %s\n", trace.status().ToString().c_str());
    return 1;
  }
  const Trace& t = *trace;
  int time_col = -1;
  for (size_t k = 0; k < t.schema.metrics.size(); ++k) {
    if (t.schema.metrics[k] == "time_ns") time_col = static_cast<int>(k);
  }
  if (time_col < 0 || t.rows() == 0) {
    std::fprintf(stderr, "interval_coverage_replay: %s has no time_ns column or no rows\n",
                 trace_path.c_str());
    return 1;
  }
  std::map<uint64_t, Forced> forced;
  if (!measured_path.empty() && !ReadForced(measured_path, &forced)) {
    std::fprintf(stderr, "interval_coverage_replay: cannot read %s\n", measured_path.c_str());
    return 1;
  }
  auto sel = OnlineSelector::Create(o);
  if (!sel.ok()) return 1;
  const auto& times = t.metrics[static_cast<size_t>(time_col)];
  std::set<uint64_t> chosen;
  for (size_t i = 0; i < t.rows(); ++i) {
    const uint32_t batch = t.batch.empty() ? 0 : t.batch[i];
    const Decision d = sel->OnIteration(t.iter[i], t.seq_len[i], batch,
                                        t.tokens.empty() ? 0.0 : static_cast<double>(t.tokens[i]));
    if (d.measure) chosen.insert(t.iter[i]);
    sel->OnTime(t.iter[i], t.seq_len[i], batch, times[i]);
  }
  Selection cur = sel->Current();
  if (!measured_path.empty()) {
    Refile(cur, t, forced);
  } else {
    for (uint64_t c : chosen) forced[c] = Forced::kFull;
  }
  WholeRunInput in;
  in.strata = &sel->strata();
  in.selection = &cur;
  in.timed = t.rows();
  double spread_sum = 0, spread_sumsq = 0;
  for (double v : times) {
    spread_sum += v;
    spread_sumsq += v * v;
  }
  in.actual["time_ns"] = {t.rows(), spread_sum};
  std::map<std::string, double> actual;
  for (size_t i = 0; i < t.rows(); ++i) {
    for (size_t k = 0; k < t.schema.metrics.size(); ++k) {
      actual[static_cast<int>(k) == time_col ? "time_ns" : t.schema.metrics[k]] += t.metrics[k][i];
    }
    auto f = forced.find(t.iter[i]);
    if (f == forced.end()) continue;
    EstimatorIteration it;
    it.ordinal = t.iter[i];
    it.seq_len = t.seq_len[i];
    it.batch = t.batch.empty() ? 0 : t.batch[i];
    it.time_ns = times[i];
    for (size_t k = 0; k < t.schema.metrics.size(); ++k) {
      const bool is_time = static_cast<int>(k) == time_col;
      if (!is_time && f->second == Forced::kTimeOnly) continue;
      it.values.push_back(
          {is_time ? "time_ns" : t.schema.metrics[k], "", t.metrics[k][i], MetricKind::kDelta});
    }
    in.measured.push_back(std::move(it));
  }
  const WholeRunEstimate e = EstimateWholeRun(in);
  std::printf("{\"trace\": \"%s\", \"iterations\": %zu, \"measured\": %zu, \"metrics\": {",
              trace_path.c_str(), t.rows(), in.measured.size());
  bool first = true;
  for (const WholeRunProjection& p : e.projections) {
    const double a = actual[p.metric];
    const bool covered = a >= p.low && a <= p.high;
    std::printf(
        "%s\n \"%s\": {\"projected\": %s, \"low\": %s, \"high\": %s, \"actual\": %s, "
        "\"error_pct\": %s, \"covered\": %s, \"bounded\": %s, \"samples\": %llu, "
        "\"strata\": %u, \"borrowed\": %u, \"reliable\": %s, \"reason\": \"%s\"}",
        first ? "" : ",", p.metric.c_str(), Num(p.total).c_str(), Num(p.low).c_str(),
        Num(p.high).c_str(), Num(a).c_str(), Num(100 * (p.total - a) / a).c_str(),
        covered ? "true" : "false", p.bounded ? "true" : "false",
        static_cast<unsigned long long>(p.samples), p.strata, p.borrowed,
        p.unreliable.empty() ? "true" : "false", p.unreliable_detail.c_str());
    first = false;
  }
  std::printf("\n}");
  for (const WholeRunSelfCheck& c : e.self_checks) {
    std::printf(
        ", \"self_check\": {\"error_pct\": %.3f, \"covered\": %s, \"independent_error_pct\": "
        "%.3f, \"independent_covered\": %s}",
        100 * c.error, c.within_interval ? "true" : "false", 100 * c.independent_error,
        c.independent_within ? "true" : "false");
  }
  if (show_strata) {
    const auto strata = sel->strata().Strata();
    std::vector<double> n(strata.size()), time(strata.size()), s(strata.size());
    for (const auto& [key, cell] : sel->strata().Cells()) {
      n[key.first] += static_cast<double>(cell.n);
      time[key.first] += cell.time;
    }
    for (const auto& [ordinal, kind] : forced) s[sel->strata().StratumOf(ordinal)] += 1;
    std::printf(", \"strata\": [");
    for (size_t h = 0; h < strata.size(); ++h) {
      std::printf(
          "%s\n {\"begin\": %llu, \"kind\": \"%s\", \"iterations\": %.0f, \"sampled\": "
          "%.0f, \"mean_ms\": %.3f}",
          h ? "," : "", static_cast<unsigned long long>(strata[h].begin),
          std::string(StratumKindName(strata[h].kind)).c_str(), n[h], s[h],
          n[h] > 0 ? time[h] / n[h] / 1e6 : 0.0);
    }
    std::printf("]");
  }
  std::printf(", \"measured_ordinals\": [");
  bool first_m = true;
  for (const auto& [ordinal, kind] : forced) {
    std::printf("%s%llu", first_m ? "" : ", ", static_cast<unsigned long long>(ordinal));
    first_m = false;
  }
  std::printf("]}\n");
  return 0;
}
