// StragglerFamilies: counts per run (never per step), ranks past the bound folded into "other",
// runs without a judged step left out, and a run's series left out whole past the cap.
#include "agent/fleet/straggler_metrics.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "agent/fleet/straggler_book.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::fleet;

namespace {

const MetricFamily& Family(const std::vector<MetricFamily>& all, const std::string& name) {
  auto it =
      std::find_if(all.begin(), all.end(), [&](const MetricFamily& f) { return f.name == name; });
  REQUIRE(it != all.end());
  return *it;
}

std::string Label(const MetricSample& s, const std::string& key) {
  for (const auto& [k, v] : s.labels) {
    if (k == key) return v;
  }
  return "";
}

RunStragglers Sample(int64_t run) {
  RunStragglers r;
  r.run = run;
  r.fleet_job = "run:abc";
  r.counts.steps = 100;
  r.counts.straggler_steps = {10, 60};
  r.counts.lag_seconds = {0.5, 2.5};
  r.counts.last_by_rank[2] = {0, 55};
  r.counts.last_by_rank[1] = {10, 5};
  r.counts.last_by_rank[40] = {0, 0};  // past the bound, never last: no series
  r.counts.last_by_rank[-1] = {0, 0};
  return r;
}

}  // namespace

TEST_CASE("fleet straggler metrics: per-run counts by cause and rank") {
  SeriesLedger ledger;
  RunStragglers idle;
  idle.run = 9;  // judged no step: no series
  auto all = StragglerFamilies({Sample(3), idle}, "n1", 1000, &ledger);
  CHECK(Family(all, "seqpoint_run_collective_steps_total").samples.size() == 1);
  CHECK(Family(all, "seqpoint_run_collective_steps_total").samples[0].value == 100);
  const MetricFamily& by_cause = Family(all, "seqpoint_run_straggler_steps_total");
  REQUIRE(by_cause.samples.size() == 2);
  CHECK(Label(by_cause.samples[0], "cause") == "data");
  CHECK(by_cause.samples[0].value == 10);
  CHECK(Label(by_cause.samples[1], "cause") == "hardware");
  CHECK(by_cause.samples[1].value == 60);
  CHECK(Label(by_cause.samples[1], "node") == "n1");
  CHECK(Label(by_cause.samples[1], "fleet_job") == "run:abc");
  const MetricFamily& ranks = Family(all, "seqpoint_run_rank_last_arrival_steps_total");
  REQUIRE(ranks.samples.size() == 3);  // rank 1 data, rank 1 hardware, rank 2 hardware
  for (const MetricSample& s : ranks.samples) {
    CHECK(Label(s, "rank") != "other");
    CHECK(Label(s, "run") == "3");
  }
  CHECK(ledger.exported == 1 + 2 + 2 + 3);
}

TEST_CASE(
    "fleet straggler metrics: ranks past the bound share one series, the cap drops runs whole") {
  RunStragglers r = Sample(4);
  for (int32_t rank = 0; rank < 64; ++rank) r.counts.last_by_rank[rank] = {0, 1};
  auto all = StragglerFamilies({r}, "n1", 1000);
  const MetricFamily& ranks = Family(all, "seqpoint_run_rank_last_arrival_steps_total");
  CHECK(ranks.samples.size() == static_cast<size_t>(kMaxStragglerRanks) + 1);
  double other = 0;
  for (const MetricSample& s : ranks.samples) {
    if (Label(s, "rank") == "other") other = s.value;
  }
  CHECK(other == 64 - kMaxStragglerRanks);
  // Room for one run's 8 series, not two: the second run is left out whole.
  SeriesLedger ledger;
  all = StragglerFamilies({Sample(1), Sample(2)}, "n1", 10, &ledger);
  CHECK(Family(all, "seqpoint_run_collective_steps_total").samples.size() == 1);
  CHECK(ledger.exported == 8);
  CHECK(ledger.dropped == 8);
}

TEST_CASE("fleet straggler book: pids mapped to runs, runs judged apart, ended runs dropped") {
  StragglerOptions o;
  o.settle_ns = 0;
  StragglerBook book(o);
  constexpr uint64_t kMs = 1'000'000;
  book.AddRank(1, 10, 0);
  book.AddRank(1, 11, 1);
  book.AddRank(2, 20, 0);  // a run of one rank: never judged
  for (uint64_t s = 0; s < 3; ++s) {
    const uint64_t b = s * 100 * kMs;
    book.OnArrival(10, b + 50 * kMs);
    book.OnArrival(11, b + 80 * kMs);  // rank 1 is slow
    book.OnArrival(20, b + 10 * kMs);
    book.OnArrival(99, b + 10 * kMs);  // no run: ignored
    for (uint32_t pid : {10u, 11u, 20u}) book.OnIteration(pid, s, 64, b + 1 * kMs, b + 90 * kMs);
  }
  book.Settle(1000 * kMs);
  auto runs = book.Snapshot([](int64_t run) { return "run:" + std::to_string(run); });
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].counts.steps == 3);
  CHECK(runs[0].counts.last_by_rank.at(1)[static_cast<size_t>(StragglerCause::kHardware)] == 3);
  CHECK(runs[0].fleet_job == "run:1");
  CHECK(runs[1].counts.steps == 0);
  auto families = StragglerFamilies(runs, "n1", 100);
  CHECK(Family(families, "seqpoint_run_collective_steps_total").samples.size() == 1);
  book.RemovePid(11);
  CHECK(book.join(1)->ranks() == 1);
  book.EndRun(1);
  CHECK(book.join(1) == nullptr);
  book.OnArrival(10, 5);  // its pid is forgotten with it
}

TEST_CASE("fleet straggler metrics: the sequential test's verdict and ratio per tested rank") {
  RunStragglers r = Sample(5);
  SlowRankState warm, slow, warming;
  warm.threshold = 6, warm.ratio = 1.01;
  slow.threshold = 6, slow.ratio = 1.12, slow.slow = true;
  warming.ratio = 3;  // before its warm-up: no series
  r.counts.slow = {{0, warm}, {2, slow}, {3, warming}, {20, warm}, {-7, slow}};
  auto all = StragglerFamilies({r}, "n1", 1000);
  const MetricFamily& verdict = Family(all, "seqpoint_run_rank_slower_than_peers");
  const MetricFamily& ratio = Family(all, "seqpoint_run_rank_compute_ratio");
  REQUIRE(verdict.samples.size() == 3);  // 0, 2, other (20 and -7: the slowest of them)
  std::map<std::string, double> v, q;
  for (const MetricSample& s : verdict.samples) v[Label(s, "rank")] = s.value;
  for (const MetricSample& s : ratio.samples) q[Label(s, "rank")] = s.value;
  CHECK(v == std::map<std::string, double>{{"0", 0}, {"2", 1}, {"other", 1}});
  CHECK(q.at("2") == doctest::Approx(1.12));
  CHECK(q.at("other") == doctest::Approx(1.12));
}
