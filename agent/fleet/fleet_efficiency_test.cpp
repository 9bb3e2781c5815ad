// The efficiency signal from a real process's run: iterations of known SL and time fed to a
// RunManager as the probes would, exported per main SL bin with the run's fleet job; the bins
// are octaves, the smallest bins are left out, the cost per unit of work is what was fed.
#include "agent/fleet/fleet_efficiency.h"

#include <doctest/doctest.h>

#include <map>

#include "agent/runs/series_cap.h"
#include "agent/testing/test_util.h"
#include "probes/testing/child_process.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::fleet;
using namespace seqpoint::daemon::testing;
using seqpoint::probes::testing::BuildPath;
using seqpoint::probes::testing::ChildProcess;

namespace {

std::map<std::string, double> ByBin(const std::vector<MetricFamily>& families,
                                    const std::string& name) {
  std::map<std::string, double> out;
  for (const MetricFamily& f : families) {
    if (f.name != name) continue;
    for (const MetricSample& s : f.samples) {
      for (const auto& [k, v] : s.labels) {
        if (k == "bin") out[v] = s.value;
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("fleet bins: SL octaves, fixed whatever the run saw") {
  CHECK(OctaveOf(0) == SlBin{0, 0});
  CHECK(OctaveOf(1) == SlBin{1, 1});
  CHECK(OctaveOf(64) == SlBin{64, 127});
  CHECK(OctaveOf(127) == SlBin{64, 127});
  CHECK(OctaveOf(128) == SlBin{128, 255});
  CHECK(OctaveOf(UINT32_MAX) == SlBin{1u << 31, UINT32_MAX});
  CHECK(BinLabel(OctaveOf(100)) == "64-127");
}

TEST_CASE("fleet bins: the main bins are those with the most work, each with enough iterations") {
  std::vector<HistogramBin> h;
  // 64-127: 40 x SL 100 (work 4000); 32-63: 100 x SL 40 (4000, ties go to the smaller SL);
  // 128-255: 30 x SL 200 (6000); 256-511: 19 x SL 300 (too few); 8-15: 50 x SL 10 (500).
  h.push_back({100, 40, 40 * 2e6, 0, 0, 40});
  h.push_back({40, 100, 100 * 1e6, 0, 0, 100});
  h.push_back({200, 30, 30 * 4e6, 30 * 5e5, 30, 30});
  h.push_back({300, 19, 19 * 6e6, 0, 0, 19});
  h.push_back({10, 50, 50 * 3e5, 0, 0, 50});
  // An SL of bin 64-127 whose 10 iterations had no begin: counted, but no work beside the time.
  h.push_back({120, 10, 0, 0, 0, 0});
  const std::vector<BinCost> bins = MainBins(h);
  REQUIRE(bins.size() == 3);
  CHECK(bins[0].bin == SlBin{128, 255});
  CHECK(bins[1].bin == SlBin{32, 63});
  CHECK(bins[2].bin == SlBin{64, 127});
  CHECK(bins[0].work == doctest::Approx(6000));
  CHECK(bins[0].time_s == doctest::Approx(30 * 4e-3));
  CHECK(bins[0].energy_j == doctest::Approx(30 * 0.5));
  CHECK(bins[0].energy_work == doctest::Approx(6000));
  CHECK(bins[2].iterations == 50);
  CHECK(bins[2].work == doctest::Approx(4000));
  CHECK(MainBins(h, 1).size() == 1);
  CHECK(MainBins({}).empty());
}

TEST_CASE("fleet job: the outermost layer that spans nodes") {
  RunJobLabels j;
  CHECK(FleetJob("pid:12:34", j) == "pid:12:34");
  j.job_name = "gnmt";
  CHECK(FleetJob("pid:12:34", j) == "name:gnmt");
  j.slurm_job_id = "4242";
  CHECK(FleetJob("slurm:4242.0", j) == "slurm:4242");
  j.launcher_run = "abc";
  CHECK(FleetJob("torchrun:abc", j) == "run:abc");  // torchrun inside the sbatch job
}

TEST_CASE("fleet efficiency: a real process's run, per main bin, cost per unit of work as fed") {
  TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  RunManagerOptions o;
  o.group_by = *ParseRunGroupBy("auto");
  o.selector.budget_count = 50;
  RunManager runs(store->get(), nullptr, o);
  auto child = ChildProcess::Start({BuildPath("agent/runs/profiled_workload")},
                                   {"SLURM_JOB_ID=4242", "SLURM_STEP_ID=0"});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  runs.OnProcessFound(ProcessInfo{child->pid(), 0, "profiled_workload", ""});
  // SL 20 (bin 16-31) and SL 40 (32-63) at 10 us per SL; SL 3 (2-3) too rare to be a main bin.
  uint64_t t = 1000;
  for (uint64_t i = 0; i < 200; ++i) {
    const uint32_t sl = i % 40 == 39 ? 3 : (i % 2 == 0 ? 20 : 40);
    const uint64_t d = sl * 10'000ull;
    runs.OnIterationBegin({child->pid(), child->pid(), i, sl, 1, sl, t});
    runs.OnIterationEnd({child->pid(), child->pid(), i, sl, 1, sl, t, t + d, true});
    t += d + 1000;
  }
  FleetOptions fo;
  fo.node = "node-a";
  const std::vector<MetricFamily> f = EfficiencyFamilies(runs, fo);
  CHECK(CheckBoundedLabels(f).ok());
  const auto work = ByBin(f, "seqpoint_fleet_bin_work_total");
  const auto time = ByBin(f, "seqpoint_fleet_bin_time_seconds_total");
  const auto iters = ByBin(f, "seqpoint_fleet_bin_iterations_total");
  REQUIRE(work.size() == 2);
  CHECK(iters.at("32-63") + iters.at("16-31") == 195);
  for (const char* bin : {"16-31", "32-63"}) {
    CHECK(time.at(bin) / work.at(bin) == doctest::Approx(10e-6).epsilon(1e-6));
  }
  CHECK(ByBin(f, "seqpoint_fleet_bin_energy_joules_total").empty());  // no energy source
  for (const MetricFamily& fam : f) {
    for (const MetricSample& s : fam.samples) {
      const std::map<std::string, std::string> l(s.labels.begin(), s.labels.end());
      CHECK(l.at("fleet_job") == "slurm:4242");
      CHECK(l.at("node") == "node-a");
    }
  }
  // The cap leaves the run out whole, never half of it, and the ledger counts it beside the
  // per-run families' series.
  SeriesLedger ledger;
  ledger.exported = 40;
  fo.ledger = &ledger;
  fo.max_series = 3;
  size_t n = 0;
  for (const MetricFamily& fam : EfficiencyFamilies(runs, fo)) n += fam.samples.size();
  CHECK(n == 0);
  CHECK(ledger.exported == 40);
  CHECK(ledger.dropped == 6);  // 2 bins x (iterations, work, time)
  fo.max_series = 6;
  n = 0;
  for (const MetricFamily& fam : EfficiencyFamilies(runs, fo)) n += fam.samples.size();
  CHECK(n == 6);
  CHECK(ledger.exported == 46);
  (void)child->WriteLine("exit");
}
