// StragglerFamilies: counts per run (never per step), ranks past the bound folded into "other",
// runs without a judged step left out, and a run's series left out whole past the cap; the
// detection floor per rank and run; the families' shape on a replayed real run (golden); the
// slow-rank view of `seqpoint show` (slow_rank_view.h).
#include "agent/fleet/straggler_metrics.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "agent/fleet/slow_rank_view.h"
#include "agent/fleet/straggler_book.h"
#include "agent/fleet/straggler_events.h"
#include "common/testing/scratch_dir.h"

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

TEST_CASE("fleet straggler metrics: the detection floor per rank and per run") {
  RunStragglers r = Sample(6);
  SlowRankState a, b, other1, other2;
  a.threshold = 6, a.floor = 1.12;
  b.threshold = 6, b.floor = 1.31;
  other1.threshold = 6, other1.floor = 1.2, other1.ratio = 1.05;
  other2.threshold = 6, other2.floor = 1.4, other2.ratio = 1.01;
  r.counts.slow = {{0, a}, {1, b}, {20, other1}, {21, other2}};
  auto all = StragglerFamilies({r}, "n1", 1000);
  std::map<std::string, double> floor;
  for (const MetricSample& s : Family(all, "seqpoint_run_rank_detectable_slowdown").samples) {
    floor[Label(s, "rank")] = s.value;
  }
  // "other": the largest floor of its ranks, whichever one its verdict shows.
  CHECK(floor == std::map<std::string, double>{{"0", 1.12}, {"1", 1.31}, {"other", 1.4}});
  const MetricFamily& run = Family(all, "seqpoint_run_detectable_slowdown");
  REQUIRE(run.samples.size() == 1);
  CHECK(run.samples[0].value == doctest::Approx(1.4));
  // A rank still warming up (floor 0) or finding nothing in time (infinite): no run floor, and
  // no series for that rank's floor.
  r.counts.slow[1].floor = std::numeric_limits<double>::infinity();
  all = StragglerFamilies({r}, "n1", 1000);
  CHECK(Family(all, "seqpoint_run_detectable_slowdown").samples.empty());
  CHECK(Family(all, "seqpoint_run_rank_detectable_slowdown").samples.size() == 2);
  r.counts.slow[1].floor = 0;
  CHECK(Family(StragglerFamilies({r}, "n1", 1000), "seqpoint_run_detectable_slowdown")
            .samples.empty());
}

TEST_CASE("fleet straggler metrics: the families' shape on a replayed real run (golden)") {
  // A recorded healthy 4-rank DDP run with random SLs (stragglers of both causes, every rank
  // past the slow-rank test's warm-up) through the book as the daemon feeds it: the families,
  // their help and label names, as tests/golden/straggler_metrics.txt holds them (the same
  // format as tests/golden/metrics.txt; scripts/gen-metrics-doc.py documents both in
  // docs/metrics.md). A change of a name, a label or a help is a diff of that file.
  const std::string source = seqpoint::testing::SourceDir();
  const std::string dir = source + "/tests/golden/straggler_healthy_hog1_random/";
  auto events =
      ReadJobTraces({dir + "rank0.csv", dir + "rank1.csv", dir + "rank2.csv", dir + "rank3.csv"});
  REQUIRE_MESSAGE(events.ok(), events.status().ToString());
  StragglerBook book;
  ReplayRecordedEvents(*events, 1, 0, &book);
  book.Settle(UINT64_MAX);
  auto families =
      StragglerFamilies(book.Snapshot([](int64_t) { return "run:replay"; }), "n1", 1000);
  std::sort(families.begin(), families.end(),
            [](const MetricFamily& a, const MetricFamily& b) { return a.name < b.name; });
  std::string shape;
  for (const MetricFamily& f : families) {
    CHECK_MESSAGE(!f.samples.empty(), f.name << ": no sample on the replayed run");
    shape += "# TYPE " + f.name + " " + f.type + "\n# HELP " + f.name + " " + f.help + "\n";
    std::set<std::string> label_sets;
    for (const MetricSample& s : f.samples) {
      std::string names;
      for (const auto& [k, v] : s.labels) names += (names.empty() ? "" : ",") + k;
      label_sets.insert(names);
    }
    for (const std::string& l : label_sets) shape += f.name + "{" + l + "}\n";
  }
  const std::string path = source + "/tests/golden/straggler_metrics.txt";
  if (std::getenv("SEQPOINT_UPDATE_GOLDEN") != nullptr) std::ofstream(path) << shape;
  std::ifstream in(path);
  std::stringstream want;
  want << in.rdbuf();
  INFO("golden file " << path << " differs; if intended, rerun with SEQPOINT_UPDATE_GOLDEN=1, "
                      << "then scripts/gen-metrics-doc.py. Got:\n"
                      << shape);
  CHECK(want.str() == shape);
}

TEST_CASE(
    "fleet slow ranks view: verdicts, floors, and null where the test cannot stand behind one") {
  StragglerCounts c;
  c.steps = 300;
  SlowRankState a, b;
  a.threshold = 6, a.sigma = 0.05, a.floor = 1.18, a.tested = 250, a.seen = 300;
  b.threshold = 6, b.sigma = 0.07, b.floor = 1.27, b.slow = true, b.ratio = 1.3, b.alarms = 1;
  c.slow = {{0, a}, {1, b}};
  nlohmann::json j = SlowRanksJson(c, 100);
  CHECK(j["steps"] == 300);
  CHECK(j["floor_steps"] == 100);
  CHECK(j["detectable_slowdown"].get<double>() == doctest::Approx(1.27));
  CHECK(j["slow"] == nlohmann::json::array({1}));
  REQUIRE(j["ranks"].size() == 2);
  CHECK(j["ranks"][0]["detectable_slowdown"].get<double>() == doctest::Approx(1.18));
  CHECK(j["ranks"][0]["seen"] == 300);
  // A rank warming up (no floor, no sigma) or whose floor is infinite: null, and no run floor.
  SlowRankState warming;
  c.slow[-5] = warming;
  j = SlowRanksJson(c, 100);
  CHECK(j["detectable_slowdown"].is_null());
  CHECK(j["ranks"][0]["rank"].is_null());  // -5: a rank of unknown number (-pid)
  CHECK(j["ranks"][0]["sigma"].is_null());
  c.slow[-5].floor = std::numeric_limits<double>::infinity();
  c.slow[-5].threshold = 6;
  j = SlowRanksJson(c, 100);
  CHECK(j["detectable_slowdown"].is_null());
  CHECK(j["ranks"][0]["detectable_slowdown"].is_null());
}
