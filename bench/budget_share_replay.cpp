// What the budget by accuracy and overhead (runs.target_error, runs.max_overhead) measures and
// what it buys: one recorded run, optionally stretched to another length, through seqpointd's
// online selector with its default budget (4,096 in all, 16 per doubling, no warm-up, one chosen
// iteration in 4 a time-only observer-effect control) and the whole-run estimator seqpointd
// projects with. bench/budget_share.py runs it over the recorded PyTorch runs and settings.
//
// Usage: budget_share_replay TRACE [--length N] [--seed S] [--target-error E]
//                            [--max-overhead O] [--cost F] [--per-doubling K] [--budget B]
//                            [--hold thin|defer]
//   --length N   a run of N iterations built from TRACE (default: TRACE as it is): its first
//                --keep rows (the warm-up) as they are, then blocks of 64 rows, block j drawn
//                from the source blocks within +-4 of j's place scaled to the source's length
//                (seeded by S): the run's shape (warm-up, a slowdown) is kept, stretched or
//                squeezed, and its noise redrawn
//   --target-error E, --max-overhead O   runs.target_error, runs.max_overhead (0: off)
//   --cost F     what one measured iteration costs the trainer, as a share of the run's mean
//                iteration time (the daemon's measurement_cost: observer-effect slowdown x mean
//                time; default 0.05, the observer-effect threshold above which collectors are
//                dropped), known from the run's start (the cap binds as early as it can)
//   --calm F     every value moved to F of its distance from its SL's mean (each metric): the
//                same run, steadier (F = 0.1: a tenth of its noise), as fixed-shape GPU runs are
//   --hold thin|defer   what max_overhead does with a pick it cannot pay for: thin (seqpointd's:
//                skipped, counted as taken) or defer (the earlier design, kept for comparison:
//                the pick's want kept, so the bin's next candidate is taken once the run's time
//                pays for it; replayed here as an iteration that cannot be measured)
// Prints one JSON object: iterations, measured, controls, over_budget, and per metric the
// projection, its interval, the actual total, error and coverage, reliability.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/trace_csv.h"
#include "selector/estimate/whole_run_estimator.h"
#include "selector/online_selector.h"

using namespace seqpoint;
using namespace seqpoint::selector;

namespace {

constexpr size_t kBlock = 64;
constexpr size_t kReach = 4;

struct Args {
  std::string trace;
  uint64_t length = 0, seed = 1, keep = 128;
  double target_error = 0, max_overhead = 0, cost = 0.05, calm = 1;
  uint32_t per_doubling = 16;
  uint64_t budget = 4096;
  uint32_t control_every = 4;
  bool defer = false;
};

std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

bool ParseArgs(int argc, char** argv, Args* a) {
  if (argc < 2) return false;
  a->trace = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--length")
      a->length = std::stoull(v);
    else if (k == "--seed")
      a->seed = std::stoull(v);
    else if (k == "--keep")
      a->keep = std::stoull(v);
    else if (k == "--target-error")
      a->target_error = std::stod(v);
    else if (k == "--max-overhead")
      a->max_overhead = std::stod(v);
    else if (k == "--cost")
      a->cost = std::stod(v);
    else if (k == "--calm")
      a->calm = std::stod(v);
    else if (k == "--per-doubling")
      a->per_doubling = static_cast<uint32_t>(std::stoul(v));
    else if (k == "--budget")
      a->budget = std::stoull(v);
    else if (k == "--control-every")
      a->control_every = static_cast<uint32_t>(std::stoul(v));
    else if (k == "--hold" && (std::strcmp(v, "thin") == 0 || std::strcmp(v, "defer") == 0))
      a->defer = std::strcmp(v, "defer") == 0;
    else
      return false;
  }
  return (argc % 2) == 0;
}

// The source rows of a run of `length` iterations built from `n` rows (see the file comment).
std::vector<size_t> Stretch(size_t n, uint64_t length, uint64_t keep, uint64_t seed) {
  std::vector<size_t> rows;
  if (length == 0) length = n;
  keep = std::min<uint64_t>({keep, n / 4, length});
  for (size_t i = 0; i < keep; ++i) rows.push_back(i);
  const size_t body = n - keep;
  const size_t src_blocks = (body + kBlock - 1) / kBlock;
  const size_t dst_blocks = (length - keep + kBlock - 1) / kBlock;
  std::mt19937_64 rng(seed);
  // Source blocks may be short (the last one): blocks are drawn until the run is long enough.
  for (size_t j = 0; rows.size() < length; ++j) {
    const double place =
        dst_blocks > 1 ? std::min(1.0, static_cast<double>(j) / (dst_blocks - 1)) : 0;
    const size_t center = static_cast<size_t>(std::lround(place * (src_blocks - 1)));
    const size_t lo = center > kReach ? center - kReach : 0;
    const size_t hi = std::min(src_blocks - 1, center + kReach);
    const size_t b = lo + rng() % (hi - lo + 1);
    for (size_t r = keep + b * kBlock; r < std::min(n, keep + (b + 1) * kBlock); ++r) {
      if (rows.size() == length) break;
      rows.push_back(r);
    }
  }
  return rows;
}

// Each value of every metric moved to `calm` of its distance from its SL's mean.
void Calm(Trace* t, double calm) {
  if (calm == 1) return;
  for (auto& column : t->metrics) {
    std::map<uint32_t, std::pair<double, double>> by_sl;  // SL -> (n, sum)
    for (size_t i = 0; i < t->rows(); ++i) {
      if (!std::isfinite(column[i])) continue;
      auto& [n, sum] = by_sl[t->seq_len[i]];
      n += 1;
      sum += column[i];
    }
    for (size_t i = 0; i < t->rows(); ++i) {
      if (!std::isfinite(column[i])) continue;
      const auto& [n, sum] = by_sl[t->seq_len[i]];
      column[i] = sum / n + calm * (column[i] - sum / n);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bool parsed = false;
  try {
    parsed = ParseArgs(argc, argv, &a);
  } catch (const std::exception&) {  // std::stoull / std::stod: not a number
  }
  if (!parsed) {
    std::fprintf(stderr,
                 "usage: budget_share_replay TRACE [--length N] [--seed S] [--keep ROWS] "
                 "[--target-error E] [--max-overhead O] [--cost F] [--per-doubling K] "
                 "[--budget B] [--control-every C] [--calm F] [--hold thin|defer]\n");
    return 2;
  }
  auto trace = LoadTrace(a.trace);
  if (!trace.ok()) {
    std::fprintf(stderr, "budget_share_replay: %s\n", trace.status().ToString().c_str());
    return 1;
  }
  Calm(&*trace, a.calm);
  const Trace& t = *trace;
  int time_col = -1;
  for (size_t k = 0; k < t.schema.metrics.size(); ++k) {
    if (t.schema.metrics[k] == "time_ns") time_col = static_cast<int>(k);
  }
  if (time_col < 0 || t.rows() < 8) {
    std::fprintf(stderr, "budget_share_replay: %s has no time_ns column or under 8 rows\n",
                 a.trace.c_str());
    return 1;
  }
  const std::vector<size_t> rows = Stretch(t.rows(), a.length, a.keep, a.seed);
  const auto& times = t.metrics[static_cast<size_t>(time_col)];
  double mean_time = 0;
  for (size_t r : rows) mean_time += times[r];
  mean_time /= static_cast<double>(rows.size());

  OnlineOptions o;  // seqpointd's (agent/daemon/daemon.cpp RunOptions, config defaults)
  o.budget_count = a.budget;
  o.per_doubling = a.per_doubling;
  o.warmup = 0;
  o.target_rel_error = a.target_error;
  o.max_overhead = a.defer ? 0 : a.max_overhead;  // defer: the cap is kept here, not inside
  auto sel = OnlineSelector::Create(o);
  if (!sel.ok()) return 1;
  const double cost = a.cost * mean_time;
  sel->set_measurement_cost(cost);
  double run_time = 0;

  WholeRunInput in;
  in.strata = &sel->strata();
  in.timed = rows.size();
  std::vector<double> actual(t.schema.metrics.size(), 0.0);
  uint64_t controls = 0, chosen = 0;
  for (size_t ordinal = 0; ordinal < rows.size(); ++ordinal) {
    const size_t r = rows[ordinal];
    const uint32_t batch = t.batch.empty() ? 0 : t.batch[r];
    // Deferring, as the selector did before thinning: over the budget, a candidate is lost
    // and its want kept (the selector's path for an iteration that cannot be measured).
    const uint64_t m = sel->measured();
    const bool spent = a.defer && a.max_overhead > 0 && m >= o.overhead_floor &&
                       static_cast<double>(m + 1) * cost > a.max_overhead * run_time;
    const Decision d =
        sel->OnIteration(ordinal, t.seq_len[r], batch,
                         t.tokens.empty() ? 0.0 : static_cast<double>(t.tokens[r]), !spent);
    sel->OnTime(ordinal, t.seq_len[r], batch, times[r]);
    run_time += times[r];
    for (size_t k = 0; k < actual.size(); ++k) actual[k] += t.metrics[k][r];
    if (!d.measure) continue;
    // One chosen iteration in control_every is an observer-effect control: timed, no counters.
    const bool control = a.control_every > 0 && chosen++ % a.control_every == a.control_every - 1;
    controls += control;
    EstimatorIteration it;
    it.ordinal = ordinal;
    it.seq_len = t.seq_len[r];
    it.batch = batch;
    it.time_ns = times[r];
    for (size_t k = 0; k < t.schema.metrics.size(); ++k) {
      const bool is_time = static_cast<int>(k) == time_col;
      if (!is_time && control) continue;
      it.values.push_back(
          {is_time ? "time_ns" : t.schema.metrics[k], "", t.metrics[k][r], MetricKind::kDelta});
    }
    in.measured.push_back(std::move(it));
  }
  const Selection cur = sel->Current();
  in.selection = &cur;
  in.actual["time_ns"] = {rows.size(), actual[static_cast<size_t>(time_col)]};
  const WholeRunEstimate e = EstimateWholeRun(in);
  double half_width = INFINITY;  // the last stratum's, as seqpoint show reports it
  (void)sel->StratumPreciseEnough(&half_width);
  std::printf(
      "{\"trace\": \"%s\", \"iterations\": %zu, \"measured\": %zu, \"controls\": %llu, "
      "\"over_budget\": %llu, \"backstop\": %llu, \"stratum_half_width\": %s, \"metrics\": {",
      a.trace.c_str(), rows.size(), in.measured.size(), static_cast<unsigned long long>(controls),
      static_cast<unsigned long long>(a.defer ? sel->missed() : sel->over_budget()),
      static_cast<unsigned long long>(sel->backstopped()), Num(half_width).c_str());
  bool first = true;
  for (const WholeRunProjection& p : e.projections) {
    double act = 0;
    for (size_t k = 0; k < actual.size(); ++k) {
      const std::string name = static_cast<int>(k) == time_col ? "time_ns" : t.schema.metrics[k];
      if (name == p.metric) act = actual[k];
    }
    std::printf(
        "%s\n \"%s\": {\"projected\": %s, \"low\": %s, \"high\": %s, \"actual\": %s, "
        "\"error_pct\": %s, \"covered\": %s, \"samples\": %llu, \"reliable\": %s}",
        first ? "" : ",", p.metric.c_str(), Num(p.total).c_str(), Num(p.low).c_str(),
        Num(p.high).c_str(), Num(act).c_str(), Num(100 * (p.total - act) / act).c_str(),
        act >= p.low && act <= p.high ? "true" : "false",
        static_cast<unsigned long long>(p.samples), p.unreliable.empty() ? "true" : "false");
    first = false;
  }
  std::printf("\n}}\n");
  return 0;
}
