// Observer-effect alarms on recorded training traces (agent/measure/observer_effect.h): how often
// a run WITHOUT any slowdown is ever flagged (false alarms per 1,000 runs), and how soon a real
// slowdown of +10%, +20% and +40% on the collector-measured iterations is flagged (delay in
// iterations of the run and in control pairs). Both for the agent's always-valid sequential
// test and, as the baseline in the same run, for the rule it replaced (the median's 95%
// interval above 1 + threshold, re-checked after every measured iteration, per group, with no
// correction for repeated looks or groups).
//
// Each simulated run is a recorded trace (tests/data/agent, tests/data/online: real iteration
// times with their real noise and drift), started at a random row and wrapped, fed to a real
// RunTracker (its selector chooses, one in runs.observer_effect_control_every chosen iterations
// is a control at a random position, counter groups rotate); the treated iterations' times are
// multiplied by the effect. The estimate is looked at after every measured iteration, as the
// daemon does. Nothing is timed.
//
// Run: observer_effect_bench SOURCE_DIR [NULL_RUNS=1000] [EFFECT_RUNS=200] [BUDGETS=256,1024]
// (a count budget of 256 gives about 64 control pairs per run, 1024 about 250: the longer a run
// is looked at, the more the old rule's false alarms grow; the sequential test's do not).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "agent/measure/observer_effect.h"
#include "agent/runs/run_tracker.h"
#include "common/trace_csv.h"

using namespace seqpoint;
using namespace seqpoint::daemon;

namespace {

constexpr double kThreshold = 0.05;  // runs.observer_effect_threshold_pct default
constexpr uint32_t kGroups = 2;      // a collector with two counter groups: 3 estimates

struct Outcome {
  int64_t new_at = -1, old_at = -1;  // iteration of the run at the first flag (-1: never)
  uint64_t new_pairs = 0, old_pairs = 0;
  uint64_t pairs = 0;  // at the end of the run
};

bool OldRule(const std::vector<ObserverPair>& pairs) {
  std::vector<double> all;
  std::map<std::string, std::vector<double>> by;
  for (const ObserverPair& p : pairs) {
    all.push_back(p.treated / p.control);
    for (const std::string& g : p.groups) by[g].push_back(p.treated / p.control);
  }
  auto flagged = [](std::vector<double> r) {
    ObserverEstimate e = EstimateRatio(std::move(r));
    return e.valid && e.low > 1 + kThreshold;
  };
  bool any = flagged(all);
  for (auto& [g, r] : by) any = any || flagged(r);
  return any;
}

Outcome Simulate(const Trace& t, size_t rows, size_t start, pid_t pid, double effect,
                 uint64_t budget) {
  const int time = t.MetricIndex("time_ns");
  selector::OnlineOptions o;
  o.budget_count = budget;
  o.counter_groups = kGroups;
  RunRecord record;
  record.id = 1;
  record.key = "bench";
  auto tracker = RunTracker::Create(record, o);
  if (!tracker.ok()) std::abort();
  std::vector<MeasuredTiming> measured;
  std::map<uint32_t, std::pair<double, uint64_t>> sl_time;  // the tracker's per-SL means
  auto ref = [&](uint32_t sl) {
    auto it = sl_time.find(sl);
    return it == sl_time.end() ? 0.0 : it->second.first / double(it->second.second);
  };
  Outcome out;
  uint64_t clock = 1'000'000;
  for (size_t i = 0; i < rows; ++i) {
    const size_t r = (start + i) % t.rows();
    const uint64_t iter = i;
    auto d = (*tracker)->Decide(pid, iter, t.seq_len[r], t.batch[r], t.tokens[r]);
    const bool control = d.measure && (*tracker)->IsControl(pid, iter);
    const bool treated = d.measure && !control;
    const double dt = t.metrics[time][r] * (treated ? 1 + effect : 1.0);
    (*tracker)->Complete(pid, iter, t.seq_len[r], t.batch[r], t.tokens[r], clock,
                         clock + static_cast<uint64_t>(dt), {});
    clock += static_cast<uint64_t>(dt) + 1000;
    auto& [sum, n] = sl_time[t.seq_len[r]];
    sum += dt;
    ++n;
    if (!d.measure) continue;
    MeasuredTiming m;
    m.ordinal = i;
    m.pid = pid;
    m.seq_len = t.seq_len[r];
    m.time_ns = dt;
    m.control = control;
    if (treated) m.groups = {GroupKey("perf", d.group)};
    measured.push_back(std::move(m));
    std::vector<ObserverPair> pairs = PairControls(measured, ref);
    out.pairs = pairs.size();
    if (out.new_at < 0 && EstimateObserverEffect(pairs, kThreshold).flagged) {
      out.new_at = static_cast<int64_t>(i);
      out.new_pairs = pairs.size();
    }
    if (out.old_at < 0 && OldRule(pairs)) {
      out.old_at = static_cast<int64_t>(i);
      out.old_pairs = pairs.size();
    }
  }
  return out;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * double(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SOURCE_DIR [NULL_RUNS] [EFFECT_RUNS] [BUDGET]\n", argv[0]);
    return 2;
  }
  const std::string src = argv[1];
  const int null_runs = argc > 2 ? std::atoi(argv[2]) : 1000;
  const int effect_runs = argc > 3 ? std::atoi(argv[3]) : 200;
  std::vector<uint64_t> budgets;
  for (const char* p = argc > 4 ? argv[4] : "256,1024"; *p;) {
    char* end = nullptr;
    budgets.push_back(std::strtoull(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p) break;
  }
  std::vector<Trace> traces;
  for (const char* f :
       {"tests/data/agent/gru_debian_1500.csv", "tests/data/online/gru_random_slow_s1.csv",
        "tests/data/online/lstm_bucketed_s1.csv"}) {
    auto t = LoadTrace(src + "/" + f);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      return 1;
    }
    traces.push_back(std::move(*t));
  }
  const size_t rows = 3000;  // each run: 3,000 iterations (a trace wrapped as needed)
  for (const uint64_t budget : budgets) {
    std::printf(
        "observer effect: %zu-iteration runs, count budget %llu, %u counter groups, "
        "threshold %.0f%%, controls 1 in 4; family-wise bound %.0f%%\n",
        rows, static_cast<unsigned long long>(budget), kGroups, kThreshold * 100,
        kObserverAlpha * 100);
    std::mt19937_64 rng(42);
    for (double effect : {0.0, 0.10, 0.20, 0.40}) {
      const int runs = effect == 0 ? null_runs : effect_runs;
      int new_flags = 0, old_flags = 0;
      std::vector<double> new_delay, old_delay, new_pairs, old_pairs, all_pairs;
      for (int k = 0; k < runs; ++k) {
        const Trace& t = traces[k % traces.size()];
        Outcome o = Simulate(t, rows, rng() % t.rows(), static_cast<pid_t>(1000 + rng() % 100000),
                             effect, budget);
        all_pairs.push_back(double(o.pairs));
        if (o.new_at >= 0) {
          ++new_flags;
          new_delay.push_back(double(o.new_at));
          new_pairs.push_back(double(o.new_pairs));
        }
        if (o.old_at >= 0) {
          ++old_flags;
          old_delay.push_back(double(o.old_at));
          old_pairs.push_back(double(o.old_pairs));
        }
      }
      if (effect == 0) {
        std::printf(
            "  no effect, %d runs (median %.0f pairs each): false alarms per 1,000 runs: "
            "sequential %.1f, old rule %.1f (ratio old/new: %s)\n",
            runs, Quantile(all_pairs, 0.5), 1000.0 * new_flags / runs, 1000.0 * old_flags / runs,
            new_flags   ? std::to_string(double(old_flags) / new_flags).c_str()
            : old_flags ? "inf"
                        : "n/a");
      } else {
        std::printf(
            "  +%.0f%%, %d runs: flagged sequential %.0f%% (delay median %.0f / p90 %.0f "
            "iterations, %.0f / %.0f pairs), old rule %.0f%% (median %.0f iterations, "
            "%.0f pairs)\n",
            effect * 100, runs, 100.0 * new_flags / runs, Quantile(new_delay, 0.5),
            Quantile(new_delay, 0.9), Quantile(new_pairs, 0.5), Quantile(new_pairs, 0.9),
            100.0 * old_flags / runs, Quantile(old_delay, 0.5), Quantile(old_pairs, 0.5));
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
