// CPU counters projected through the process's CPU time (Auxiliary::kCpu): a loaded node makes
// iterations wait for a CPU, which lengthens their time but not their work; a ratio through time
// bills that wait as CPU work (issue 19: +14% to +305% on loaded runs). The time strata carry
// each iteration's CPU time (TimeStrata::AddCpu) and the estimator picks it where nearly every
// iteration has one.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "selector/estimate/whole_run_estimator.h"
#include "selector/test_runs.h"

namespace seqpoint::selector {
namespace {

// A run of 3000 iterations whose second half shares the CPUs: there, each unmeasured iteration
// waits as long as it works (time = 2 x CPU) while the measured ones happen not to (the
// samples are few; which iterations wait is chance). The task-clock of a measured iteration is
// its CPU time plus 0.3% (what the probes add). `cpu_every`: every how many iterations have a
// CPU time (1: all; 0: none); `sample_cpu`: whether the measured ones do.
struct LoadedRun {
  OnlineSelector sel = *OnlineSelector::Create([] {
    OnlineOptions o;
    o.per_doubling = 16;
    o.warmup = 0;
    return o;
  }());
  Selection current;
  WholeRunInput in;
  double cpu_total = 0;

  explicit LoadedRun(uint32_t cpu_every, bool sample_cpu = true) {
    const testing::Run r = testing::MakeRun(3000, 5);
    double cpu_seen = 0;
    uint64_t cpu_n = 0;
    for (size_t i = 0; i < r.seq_len.size(); ++i) {
      const Decision d = sel.OnIteration(i, r.seq_len[i], r.batch[i], 0);
      const double cpu = r.time[i];
      const double time = i >= 1500 && !d.measure ? 2 * cpu : cpu;
      sel.OnTime(i, r.seq_len[i], r.batch[i], time);
      cpu_total += cpu;
      const bool known = cpu_every > 0 && i % cpu_every == 0;
      if (known) {
        CHECK(sel.OnCpu(i, r.seq_len[i], cpu));
        cpu_seen += cpu;
        ++cpu_n;
      }
      if (!d.measure) continue;
      EstimatorIteration it{i, r.seq_len[i], r.batch[i], time, std::nullopt, {}};
      it.values.push_back({"perf:task-clock", "ns", cpu * 1.003, MetricKind::kDelta});
      it.values.push_back({"perf:context-switches", "count", time / 1e5, MetricKind::kDelta});
      if (known && sample_cpu) {
        it.cpu_ns = cpu;
        it.values.push_back({kProcessCpuMetric, "ns", cpu, MetricKind::kDelta});
      }
      in.measured.push_back(std::move(it));
    }
    current = sel.Current();
    in.strata = &sel.strata();
    in.selection = &current;
    in.timed = r.seq_len.size();
    if (cpu_n > 0) in.actual[kProcessCpuMetric] = {cpu_n, cpu_seen};
  }
};

double Error(const WholeRunProjection* p, double truth) { return (p->total - truth) / truth; }

}  // namespace

TEST_CASE("cpu auxiliary: a CPU counter goes through the process CPU time, not the waits") {
  LoadedRun with(1);
  const WholeRunEstimate e = EstimateWholeRun(with.in);
  const WholeRunProjection* tc = e.Find("perf:task-clock");
  REQUIRE(tc != nullptr);
  CHECK(tc->auxiliary == "cpu");
  CHECK(std::fabs(Error(tc, with.cpu_total * 1.003)) < 0.02);
  CHECK(tc->low <= with.cpu_total * 1.003);
  CHECK(tc->high >= with.cpu_total * 1.003);
  // Waits are what context switches count: they stay on time.
  const WholeRunProjection* cs = e.Find("perf:context-switches");
  REQUIRE(cs != nullptr);
  CHECK(cs->auxiliary == "time");
  // The process CPU time itself is a cheap metric: against the cost proxy, self-checked.
  const WholeRunProjection* pc = e.Find(kProcessCpuMetric);
  REQUIRE(pc != nullptr);
  CHECK(pc->auxiliary == "cost");
  bool checked = false;
  for (const WholeRunSelfCheck& c : e.self_checks) checked |= c.metric == kProcessCpuMetric;
  CHECK(checked);

  // The same run without CPU times: through time, and the waits billed as work.
  LoadedRun without(0);
  const WholeRunEstimate t = EstimateWholeRun(without.in);
  const WholeRunProjection* tt = t.Find("perf:task-clock");
  REQUIRE(tt != nullptr);
  CHECK(tt->auxiliary == "time");
  CHECK(Error(tt, without.cpu_total * 1.003) > 0.2);
  CHECK(t.Find(kProcessCpuMetric) == nullptr);
}

TEST_CASE("cpu auxiliary: too few iterations with a CPU time fall back to time") {
  // 1 in 2 of the run: under kMinCpuCoverage.
  LoadedRun half(2);
  const WholeRunEstimate he = EstimateWholeRun(half.in);
  const WholeRunProjection* h = he.Find("perf:task-clock");
  REQUIRE(h != nullptr);
  CHECK(h->auxiliary == "time");
  // Every iteration has one but the measured ones' are unknown (a restored run's samples).
  LoadedRun unsampled(1, /*sample_cpu=*/false);
  const WholeRunEstimate ue = EstimateWholeRun(unsampled.in);
  const WholeRunProjection* u = ue.Find("perf:task-clock");
  REQUIRE(u != nullptr);
  CHECK(u->auxiliary == "time");
}

TEST_CASE("cpu auxiliary: which metrics count CPU work") {
  for (const char* m : {"perf:task-clock", "perf:cpu-clock", "perf:instructions", "perf:cycles",
                        "perf:cache-misses", "papi:PAPI_TOT_INS"}) {
    CAPTURE(m);
    CHECK(IsCpuWorkMetric(m));
  }
  for (const char* m : {"perf:context-switches", "perf:page-faults", "perf:cpu-migrations",
                        "perf:running_ratio", "papi:sde:::SeqTest::iterations", "time_ns",
                        "energy_uj", "process_cpu_ns", "nvml:energy", "perf:"}) {
    CAPTURE(m);
    CHECK(!IsCpuWorkMetric(m));
  }
}

TEST_CASE("cpu auxiliary: time strata file each CPU time with its iteration's time") {
  // A 3x jump of time at 2000 opens a back-dated change stratum: the iterations filed before
  // the alarm move with their CPU. Every iteration's CPU is half its time: every cell keeps
  // that ratio, whatever moved.
  const testing::Run r = testing::MakeRun(4000, 9);
  TimeStrata s;
  double cpu_total = 0;
  for (size_t i = 0; i < r.seq_len.size(); ++i) {
    const double time = r.time[i] * (i >= 2000 ? 3.0 : 1.0);
    s.Observe(i, r.seq_len[i], CostProxy(r.seq_len[i], r.batch[i]), time);
    if (i % 500 == 7) continue;  // a few never get one
    CHECK(s.AddCpu(i, r.seq_len[i], time / 2));
    cpu_total += time / 2;
  }
  CHECK(!s.AddCpu(7, r.seq_len[7] + 1, 1.0));  // not that iteration's SL
  CHECK(!s.AddCpu(99999, 1, 1.0));             // never observed
  REQUIRE(s.warmup_settled());
  CHECK(!s.changes().empty());
  double cpu = 0;
  uint64_t n = 0, cpu_n = 0;
  for (const auto& [key, c] : s.Cells()) {
    n += c.n;
    cpu_n += c.cpu_n;
    cpu += c.cpu;
    CHECK(c.cpu_n <= c.n);
    if (c.cpu_n > 0) CHECK(c.cpu == doctest::Approx(c.cpu_time / 2).epsilon(1e-9));
  }
  CHECK(n == 4000);
  CHECK(cpu_n == 4000 - 8);
  CHECK(cpu == doctest::Approx(cpu_total).epsilon(1e-9));
}

TEST_CASE("cpu auxiliary: the CPU times are in the checkpoint, and a version-4 image loads") {
  const testing::Run r = testing::MakeRun(3000, 13);
  OnlineOptions o;
  o.per_doubling = 16;
  for (size_t at : {size_t{20}, size_t{2500}}) {
    CAPTURE(at);
    auto a = *OnlineSelector::Create(o);
    for (size_t i = 0; i < at; ++i) {
      a.OnIteration(i, r.seq_len[i], r.batch[i], 0);
      a.OnTime(i, r.seq_len[i], r.batch[i], r.time[i]);
      a.OnCpu(i, r.seq_len[i], r.time[i] * 0.9);
    }
    const std::string image = a.Checkpoint();
    auto b = *OnlineSelector::Create(o);
    REQUIRE(b.LoadCheckpoint(image).ok());
    CHECK(b.Checkpoint() == image);
    double cpu_a = 0, cpu_b = 0;
    for (const auto& [k, c] : a.strata().Cells()) cpu_a += c.cpu;
    for (const auto& [k, c] : b.strata().Cells()) cpu_b += c.cpu;
    CHECK(cpu_b == cpu_a);
    CHECK(cpu_a > 0);
  }
  // Version 4 had no CPU times: a selector that was given none, its image with the version-5
  // part of the strata (one byte: none) cut out and the version set to 4. The byte follows the
  // first occurrences, whose last one is the 20th iteration's SL's (cost, time).
  auto a = *OnlineSelector::Create(o);
  for (size_t i = 0; i < 20; ++i) {
    a.OnIteration(i, r.seq_len[i], r.batch[i], 0);
    a.OnTime(i, r.seq_len[i], r.batch[i], r.time[i]);
  }
  const std::string image = a.Checkpoint();
  StateWriter part;  // the last first occurrence, then the version-5 byte
  uint32_t last_sl = 0;
  for (const auto& [sl, f] : a.strata().FirstOccurrences()) last_sl = std::max(last_sl, sl);
  const FirstOccurrence& f = a.strata().FirstOccurrences().at(last_sl);
  part.Put(last_sl);
  part.Put(f.ordinal);
  part.Put(f.cost);
  part.Put(f.time);
  part.Put<uint8_t>(0);
  const std::string cut = part.Take();
  const size_t at = image.find(cut);
  REQUIRE(at != std::string::npos);
  std::string old = image.substr(0, at + cut.size() - 1) + image.substr(at + cut.size());
  old[4] = 4;  // the version after the magic
  auto b = *OnlineSelector::Create(o);
  const Status loaded = b.LoadCheckpoint(old);
  REQUIRE_MESSAGE(loaded.ok(), loaded.ToString());
  CHECK(b.Checkpoint() == image);  // the same state: no CPU times
  CHECK(b.strata().observed() == 20);
}

}  // namespace seqpoint::selector
