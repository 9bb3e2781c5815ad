// The cardinality rules of docs/metrics.md: the per-run series cap leaves whole runs out, and
// no exported series carries an unbounded label (pid, iteration, SL).
#include "agent/runs/series_cap.h"

#include <doctest/doctest.h>

using namespace seqpoint::daemon;

TEST_CASE("agent series cap: a run that would pass the cap is left out whole") {
  auto a = Gauge("a", "a");
  auto b = Gauge("b", "b");
  SeriesCap cap({&a, &b}, 5);
  for (int run = 0; run < 4; ++run) {
    cap.Begin();
    a.Add({{"run", std::to_string(run)}}, 1);
    b.Add({{"run", std::to_string(run)}, {"metric", "x"}}, 1);
    CHECK(cap.Commit() == (run < 2));  // two series a run: runs 0 and 1 fit in 5
  }
  CHECK(cap.kept() == 4);
  CHECK(cap.dropped() == 4);
  CHECK(a.samples.size() == 2);
  CHECK(b.samples.size() == 2);
  CHECK(b.samples.back().labels.front().second == "1");  // the oldest runs kept
}

TEST_CASE("agent series cap: unbounded labels and overlong values are refused") {
  std::vector<MetricFamily> ok = {Gauge("g", "g").Add({{"run", "1"}, {"metric", "time"}}, 1)};
  CHECK(CheckBoundedLabels(ok).ok());
  for (const char* bad : {"pid", "iter", "seq_len"}) {
    std::vector<MetricFamily> f = {Gauge("g", "g").Add({{"run", "1"}, {bad, "7"}}, 1)};
    auto st = CheckBoundedLabels(f);
    CHECK(!st.ok());
    CHECK(st.message().find(bad) != std::string::npos);
  }
  std::vector<MetricFamily> long_value = {
      Gauge("g", "g").Add({{"job_name", std::string(kMaxLabelBytes + 1, 'x')}}, 1)};
  CHECK(!CheckBoundedLabels(long_value).ok());
}

TEST_CASE("agent series cap: its families report the ledger") {
  SeriesLedger l;
  l.exported = 7;
  l.dropped = 3;
  l.overflowed = {4, 5};
  auto f = SeriesFamilies(l, 10);
  REQUIRE(f.size() == 4);
  CHECK(f[0].name == "seqpoint_series");
  CHECK(f[0].samples[0].value == 7);
  CHECK(f[1].samples[0].value == 10);
  CHECK(f[2].samples[0].value == 3);
  CHECK(f[3].name == "seqpoint_series_overflow_runs_total");
  CHECK(f[3].samples[0].value == 2);
}
