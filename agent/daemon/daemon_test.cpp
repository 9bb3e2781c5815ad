// The daemon end to end, in-process, fed by a trace recorded from the real trainer (the eBPF
// probes need root and a live process; daemon_binary_test.cpp and the e2e test cover those).
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "agent/testing/test_harness.h"
#include "common/trace_csv.h"
#include "selector/estimate/projection.h"
#include "selector/estimate/stratified_projection.h"
#include "selector/online_selector.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

// The run of `key` once it is no longer active, from `runs --all`.
json ClosedRun(const DaemonHarness& h, const std::string& key) {
  json found;
  WaitFor([&] {
    auto runs = h.Runs(true);
    if (!runs.ok()) return false;
    for (const json& r : (*runs)["runs"]) {
      if (r["key"] == key && r["state"] != "active") found = r;
    }
    return !found.is_null();
  });
  return found;
}

double ColumnTotal(const seqpoint::Trace& t, const std::string& column, uint64_t first,
                   uint64_t last) {
  int m = t.MetricIndex(column);
  double sum = 0;
  for (uint64_t r = first; r < last && r < t.rows(); ++r) sum += t.metrics[m][r];
  return sum;
}

}  // namespace

TEST_CASE("agent daemon: a replayed run is selected, measured within budget and projected") {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.run_budget = 40;
  // The overhead cap decides on a cost measured live (controls against measured iterations),
  // which the library below cannot be fed: off here, so the two choose alike.
  cfg.run_max_overhead = 0;
  DaemonHarness h;
  REQUIRE_MESSAGE(h.Start(cfg, ReplayParts(1)).ok(), "daemon start");
  json run = ClosedRun(h, "job-0");
  REQUIRE(!run.is_null());
  CHECK(run["state"] == "finished");
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  CHECK(run["iterations"] == trace->rows());

  auto show = h.Show("job-0");
  REQUIRE_MESSAGE(show.ok(), show.status().ToString());
  const json& s = *show;
  uint64_t measured = 0;
  double weights = 0;
  for (const json& p : s["seqpoints"]) {
    measured += p["iters"].size();
    weights += p["weight"].get<double>();
  }
  CHECK(measured <= 40);
  CHECK(measured >= 20);
  // `runs --all` lists the closed run with what it measured and its self-check, as `show`.
  CHECK(run["measured"].get<uint64_t>() == measured);
  REQUIRE(run["self_check_error"].is_number());
  CHECK(run["self_check_error"].get<double>() ==
        doctest::Approx(s["self_check"]["error"].get<double>()).epsilon(1e-6));
  CHECK(weights == doctest::Approx(static_cast<double>(trace->rows())));
  // Every metric column is projected, and exactly as the selector library projects it from
  // the same iterations: the daemon adds no error of its own. The library is fed as the daemon
  // is: every iteration's start, then its time (the replay's timestamps are the trace's).
  seqpoint::selector::OnlineOptions o;
  o.budget_count = 40;
  o.budget_fraction = cfg.run_budget_fraction;
  o.per_doubling = static_cast<uint32_t>(cfg.run_budget_per_doubling);
  o.warmup = static_cast<uint64_t>(cfg.run_warmup_iterations);
  o.target_error_pct = cfg.run_target_error_pct;
  o.target_rel_error = cfg.run_target_error;
  auto sel = seqpoint::selector::OnlineSelector::Create(o);
  REQUIRE(sel.ok());
  const int time_col = trace->MetricIndex("time_ns");
  for (size_t r = 0; r < trace->rows(); ++r) {
    sel->OnIteration(r, trace->seq_len[r], trace->batch[r], static_cast<double>(trace->tokens[r]));
    sel->OnTime(r, trace->seq_len[r], trace->batch[r], trace->metrics[time_col][r]);
  }
  seqpoint::selector::Selection selection = sel->Current();
  // Controls (observer_effect.h) are timed but measured by no collector: the collector metrics
  // come from the other chosen iterations only.
  ControlRequest report;
  report.cmd = "report";
  report.run = "job-0";
  auto rep = h.Request(report);
  REQUIRE(rep.ok());
  std::set<uint64_t> controls;
  for (const json& m : (*rep)["measurements"]) {
    if (m["metric"] == "observer:control") controls.insert(m["iter"].get<uint64_t>());
  }
  CHECK(controls.size() >= measured / 4);
  for (std::string metric : {"time_ns", "task_clock_ns", "page_faults"}) {
    REQUIRE_MESSAGE(s["projections"].contains(metric), metric);
    const json& p = s["projections"][metric];
    int m = trace->MetricIndex(metric);
    std::vector<seqpoint::selector::StrataSample> samples;
    for (const auto& pt : selection.points) {
      for (uint64_t r : pt.iters) {
        if (metric != "time_ns" && controls.count(r)) continue;
        samples.push_back({r, trace->seq_len[r],
                           seqpoint::selector::CostProxy(trace->seq_len[r], trace->batch[r]),
                           trace->metrics[time_col][r], trace->metrics[m][r]});
      }
    }
    auto expected = seqpoint::selector::ProjectStratified(
        sel->strata(), selection, samples,
        metric == "time_ns" ? seqpoint::selector::Auxiliary::kCost
                            : seqpoint::selector::Auxiliary::kTime);
    REQUIRE(expected.ok());
    double actual = ColumnTotal(*trace, metric, 0, trace->rows());
    INFO(metric << " projected " << p["total"] << " [" << p["low"] << ", " << p["high"]
                << "] actual " << actual);
    if (p.contains("left_out") && p["left_out"].is_string() &&
        !p["left_out"].get<std::string>().empty()) {
      // Left out, never printed: only where the run's own measured total falls outside the
      // interval the estimator gives (the self-check), and only for time.
      CHECK(metric == "time_ns");
      CHECK(p["left_out"].get<std::string>() == "self_check_missed");
      CHECK(p["total"].is_null());
      CHECK((actual < expected->whole.low || actual > expected->whole.high));
      continue;
    }
    CHECK(p["total"].get<double>() == doctest::Approx(expected->whole.total).epsilon(1e-9));
    CHECK(p["low"].get<double>() == doctest::Approx(expected->whole.low).epsilon(1e-9));
    if (expected->bounded) {
      CHECK(p["high"].get<double>() == doctest::Approx(expected->whole.high).epsilon(1e-9));
    } else {
      CHECK(p["high"].is_null());  // +inf: the samples cannot bound it
      CHECK_FALSE(p["bounded"].get<bool>());
    }
    CHECK(p["steady_state"]["total"].get<double>() ==
          doctest::Approx(expected->steady.total).epsilon(1e-9));
  }
  // The self-check compares with the time measured on every iteration: the trace's own total.
  REQUIRE(s.contains("self_check"));
  const json& check = s["self_check"];
  double actual_time = ColumnTotal(*trace, "time_ns", 0, trace->rows());
  CHECK(check["actual"].get<double>() == doctest::Approx(actual_time).epsilon(1e-6));
  CHECK(check["error"].get<double>() ==
        doctest::Approx((check["projected"].get<double>() - actual_time) / actual_time));
  CHECK(check["within_interval"].get<bool>() ==
        (actual_time >= check["low"].get<double>() && actual_time <= check["high"].get<double>()));
  CHECK(s["histogram"].size() > 10);
}

TEST_CASE("agent daemon: a restarted daemon resumes the run it was watching") {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.run_budget = 40;
  ReplaySpec first;
  first.max_rows = 600;
  first.exit_at_end = false;  // the trainer keeps running while the agent is down
  int64_t run_id = 0;
  uint64_t measured_before = 0;
  {
    DaemonHarness h;
    REQUIRE(h.Start(cfg, ReplayParts(1, first)).ok());
    REQUIRE(WaitFor([&] {
      auto s = h.Show("job-0");
      return s.ok() && (*s)["run"]["iterations"] == 600;
    }));
    auto s = h.Show("job-0");
    run_id = (*s)["run"]["id"];
    for (const json& p : (*s)["seqpoints"]) measured_before += p["iters"].size();
    h.Stop();  // SIGTERM path: flushes, leaves the run active
  }
  ReplaySpec second;
  second.first_row = 700;  // 100 iterations happened while the agent was down
  DaemonHarness h;
  REQUIRE(h.Start(cfg, ReplayParts(1, second)).ok());
  json run = ClosedRun(h, "job-0");
  REQUIRE(!run.is_null());
  CHECK(run["id"] == run_id);
  CHECK(run["state"] == "finished");
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  CHECK(run["iterations"] == 600 + (trace->rows() - 700));
  CHECK(run["unobserved"] == 100);
  auto s = h.Show(std::to_string(run_id));
  REQUIRE(s.ok());
  uint64_t measured_after = 0;
  for (const json& p : (*s)["seqpoints"]) measured_after += p["iters"].size();
  CHECK(measured_after >= measured_before);
  CHECK(measured_after <= 40);
  CHECK((*s)["projections"].contains("task_clock_ns"));
}

TEST_CASE("agent daemon: a crashed trainer closes its run marked crashed") {
  TempDir dir;
  ReplaySpec spec;
  spec.crash_at_end = true;
  spec.max_rows = 300;
  DaemonHarness h;
  REQUIRE(h.Start(DaemonHarness::TestConfig(dir), ReplayParts(1, spec)).ok());
  json run = ClosedRun(h, "job-0");
  REQUIRE(!run.is_null());
  CHECK(run["state"] == "crashed");
  CHECK(run["end_reason"].get<std::string>().find("signal 11") != std::string::npos);
  CHECK(run["iterations"] == 300);
}

TEST_CASE("agent daemon: 16 training processes at once are 16 runs, each projected") {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.run_budget = 20;
  ReplaySpec spec;
  spec.max_rows = 400;
  DaemonHarness h;
  REQUIRE(h.Start(cfg, ReplayParts(16, spec)).ok());
  for (int i = 0; i < 16; ++i) {
    json run = ClosedRun(h, "job-" + std::to_string(i));
    REQUIRE(!run.is_null());
    CHECK(run["state"] == "finished");
    CHECK(run["iterations"] == 400);
    auto s = h.Show(std::to_string(run["id"].get<int64_t>()));
    REQUIRE(s.ok());
    CHECK((*s)["projections"].contains("time_ns"));
  }
  auto all = h.Runs(true);
  CHECK((*all)["runs"].size() == 16);
}

TEST_CASE("agent daemon: report holds measurements and the SL-bin cost history") {
  TempDir dir;
  ReplaySpec spec;
  spec.max_rows = 300;
  DaemonHarness h;
  REQUIRE(h.Start(DaemonHarness::TestConfig(dir), ReplayParts(1, spec)).ok());
  json run = ClosedRun(h, "job-0");
  REQUIRE(!run.is_null());
  ControlRequest r;
  r.cmd = "report";
  r.run = "job-0";
  auto report = h.Request(r);
  REQUIRE(report.ok());
  CHECK(!(*report)["measurements"].empty());
  REQUIRE(!(*report)["history"].empty());
  const json& day = (*report)["history"][0];
  CHECK(day["n"].get<uint64_t>() > 0);
  CHECK(day["mean"].get<double>() > 0);
  ControlRequest hist;
  hist.cmd = "history";
  hist.seq_len = (*report)["histogram"][0]["seq_len"].get<int64_t>();
  auto rows = h.Request(hist);
  REQUIRE(rows.ok());
  CHECK(!(*rows)["days"].empty());
}
