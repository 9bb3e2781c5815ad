// The run's attribution on what is uploaded (issue 12, item 3): a real process started with a
// Slurm job's environment; every uploaded per-run series carries launcher, job id, step, job
// name, world size and node, read and sanitized from that environment; /metrics keeps them on
// seqpoint_run_info alone. No series carries an unbounded label.
#include "agent/runs/run_metrics.h"

#include <doctest/doctest.h>

#include <map>

#include "agent/testing/test_util.h"
#include "probes/testing/child_process.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using seqpoint::probes::testing::BuildPath;
using seqpoint::probes::testing::ChildProcess;

namespace {

std::map<std::string, std::string> AsMap(const Labels& labels) {
  return std::map<std::string, std::string>(labels.begin(), labels.end());
}

}  // namespace

TEST_CASE("agent run metrics: uploaded series carry the run's attribution from its environment") {
  TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  RunManagerOptions o;
  o.group_by = *ParseRunGroupBy("auto");
  o.selector.budget_count = 50;
  RunManager runs(store->get(), nullptr, o);
  auto child =
      ChildProcess::Start({BuildPath("agent/runs/profiled_workload")},
                          {"SLURM_JOB_ID=4242", "SLURM_STEP_ID=3", "SLURM_JOB_NAME=bert \"large\"",
                           "SLURM_NTASKS=16", "SEQPOINT_RUN_ID=ignored-under-slurm"});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  runs.OnProcessFound(ProcessInfo{child->pid(), 0, "profiled_workload", ""});
  for (uint64_t i = 0; i < 100; ++i) {
    const uint32_t sl = 8 + static_cast<uint32_t>(i % 5) * 8;
    runs.OnIterationBegin({child->pid(), child->pid(), i, sl, 1, sl, 1000 + i * 1000});
    runs.OnIterationEnd(
        {child->pid(), child->pid(), i, sl, 1, sl, 1000 + i * 1000, 1900 + i * 1000, true});
  }
  RunMetricsOptions mo;
  mo.node = "node-a";
  const std::map<std::string, std::string> want = {
      {"launcher", "slurm"},        {"job_id", "4242"},   {"step", "3"},
      {"job_name", "bert__large_"}, {"world_size", "16"}, {"node", "node-a"}};
  std::vector<MetricFamily> up = RunFamilies(runs, mo, /*for_upload=*/true);
  CHECK(CheckBoundedLabels(up).ok());
  size_t series = 0;
  for (const MetricFamily& f : up) {
    for (const MetricSample& s : f.samples) {
      auto l = AsMap(s.labels);
      if (!l.count("run")) continue;
      ++series;
      for (const auto& [k, v] : want) CHECK_MESSAGE(l[k] == v, f.name << " " << k);
    }
  }
  CHECK(series > 10);
  std::vector<MetricFamily> scraped = RunFamilies(runs, mo, /*for_upload=*/false);
  CHECK(CheckBoundedLabels(scraped).ok());
  for (const MetricFamily& f : scraped) {
    for (const MetricSample& s : f.samples) {
      const bool info = f.name == "seqpoint_run_info";
      CHECK_MESSAGE(AsMap(s.labels).count("job_name") == (info ? 1u : 0u), f.name);
      if (info) {
        for (const auto& [k, v] : want) CHECK(AsMap(s.labels)[k] == v);
      }
    }
  }
  (void)child->WriteLine("exit");
}
