// The cardinality rules of docs/metrics.md on a node watching 64 runs at once (replayed from
// the recorded trainer trace, each process its own run, all still active): how many series
// /metrics holds per node, that runs.max_series caps them (whole runs left out, counted), and
// that no series is labelled by a pid, an iteration or an SL.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <sstream>

#include "agent/runs/series_cap.h"
#include "agent/testing/test_harness.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;

namespace {

struct Exposition {
  size_t run_series = 0;                // series with a run label
  std::set<std::string> runs;           // run ids seen
  std::set<std::string> label_names;    // over every series
  std::map<std::string, double> plain;  // value of every series without labels
};

Exposition Parse(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t brace = line.find('{');
    const size_t space = line.rfind(' ');
    if (brace == std::string::npos || brace > space) {
      e.plain[line.substr(0, space)] = std::stod(line.substr(space + 1));
      continue;
    }
    // name{a="x",b="y"} v: label values hold no '"' (sanitized), so split on '",'.
    const std::string inner = line.substr(brace + 1, line.rfind('}') - brace - 1);
    for (size_t at = 0; at < inner.size();) {
      const size_t eq = inner.find('=', at);
      const size_t close = inner.find('"', eq + 2);
      const std::string name = inner.substr(at, eq - at);
      e.label_names.insert(name);
      if (name == "run") {
        ++e.run_series;
        e.runs.insert(inner.substr(eq + 2, close - eq - 2));
      }
      at = close + 2;
    }
  }
  return e;
}

Exposition Watch64(int64_t max_series) {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.run_max_series = max_series;
  ReplaySpec spec;
  spec.max_rows = 300;
  spec.exit_at_end = false;  // all 64 stay active
  DaemonHarness h;
  REQUIRE(h.Start(cfg, ReplayParts(64, spec)).ok());
  REQUIRE(WaitFor([&] {
    auto runs = h.Runs(false);
    if (!runs.ok() || (*runs)["runs"].size() != 64) return false;
    for (const auto& r : (*runs)["runs"]) {
      if (r["iterations"] != 300) return false;
    }
    return true;
  }));
  HttpResult m = HttpGet("127.0.0.1", h.metrics_port(), "/metrics");
  REQUIRE(m.status == 200);
  return Parse(m.body);
}

}  // namespace

TEST_CASE("agent cardinality: 64 runs on a node, their series counted and capped") {
  Exposition all = Watch64(1'000'000);
  const double per_run = static_cast<double>(all.run_series) / 64;
  MESSAGE("64 runs: " << all.run_series << " per-run series on /metrics (" << per_run
                      << " a run), seqpoint_series " << all.plain["seqpoint_series"]);
  CHECK(all.runs.size() == 64);
  CHECK(all.plain["seqpoint_series"] == static_cast<double>(all.run_series));
  CHECK(all.plain["seqpoint_series_overflow_runs_total"] == 0);
  for (const std::string& banned : UnboundedLabelNames()) {
    CHECK_MESSAGE(all.label_names.count(banned) == 0, banned << " is a label");
  }

  // A cap that holds about 40 of the runs: the rest are left out whole, and counted.
  const int64_t cap = static_cast<int64_t>(per_run * 40);
  Exposition capped = Watch64(cap);
  MESSAGE("runs.max_series = " << cap << ": " << capped.run_series << " series of "
                               << capped.runs.size() << " runs exported, "
                               << capped.plain["seqpoint_series_overflow_runs_total"]
                               << " runs overflowed, " << capped.plain["seqpoint_series_dropped"]
                               << " series dropped");
  CHECK(capped.run_series <= static_cast<size_t>(cap));
  CHECK(capped.plain["seqpoint_series"] == static_cast<double>(capped.run_series));
  CHECK(capped.plain["seqpoint_series_limit"] == static_cast<double>(cap));
  CHECK(capped.runs.size() < 64);
  CHECK(capped.runs.size() >= 35);
  CHECK(capped.plain["seqpoint_series_overflow_runs_total"] ==
        static_cast<double>(64 - capped.runs.size()));
  CHECK(capped.plain["seqpoint_series_dropped"] > 0);
  CHECK(capped.runs.count("1") == 1);  // the oldest runs keep their series
}
