// Gauge intervals on the values seqpointd read on a real H100 (bench/gpu/prove.sh, first device
// run; testdata/h100_*_gauges.csv): every iteration's own wall time from the trainer, the NVML
// energy it read itself at the end of each SL phase, and the nvml:gpu0 gauges seqpointd read on
// the iterations it measured. Before the fix a constant gauge had a nonzero interval (mem_total,
// identical on all 97 measured iterations: 79.65 GiB [72.55, 93.15] GiB) and utilisation left
// its range (util_gpu 38.8 % [-30.9, 108.6] %).
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/testing/scratch_dir.h"
#include "selector/estimate/whole_run_estimator.h"
#include "selector/online_selector.h"

namespace seqpoint::selector {
namespace {

constexpr const char* kGauges[] = {"power",     "util_gpu", "util_mem", "mem_total",
                                   "mem_clock", "sm_clock", "mem_used"};
constexpr const char* kUnits[] = {"W", "%", "%", "bytes", "MHz", "MHz", "bytes"};

struct Replayed {
  OnlineSelector sel = *OnlineSelector::Create([] {
    OnlineOptions o;
    o.per_doubling = 16;  // the run's seqpointd.toml
    return o;
  }());
  Selection current;
  WholeRunInput in;
  double energy_mj = 0, wall_ns = 0;                    // the trainer's own totals
  std::map<uint32_t, std::pair<double, double>> phase;  // SL -> (energy mJ, wall ns)
  std::map<std::string, std::vector<double>> readings;  // every reading seqpointd took
};

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) out.push_back(cell);
  while (out.size() < 11) out.emplace_back();
  return out;
}

// Replays the run through the online selector (strata and bins) with seqpointd's measured
// iterations and their gauges.
void Replay(const std::string& file, Replayed& r) {
  std::ifstream in(seqpoint::testing::SourceDir() + "/selector/estimate/testdata/" + file);
  REQUIRE_MESSAGE(in.good(), file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.starts_with("iter,")) continue;
    const std::vector<std::string> c = Split(line);
    const uint64_t i = std::stoull(c[0]);
    const auto sl = static_cast<uint32_t>(std::stoul(c[1]));
    const double t = std::stod(c[2]) * 1e3;
    r.sel.OnIteration(i, sl, 1, 0);
    r.sel.OnTime(i, sl, 1, t);
    r.wall_ns += t;
    r.phase[sl].second += t;
    if (!c[3].empty()) {
      r.energy_mj += std::stod(c[3]);
      r.phase[sl].first += std::stod(c[3]);
    }
    EstimatorIteration it{i, sl, 1, t, std::nullopt, {}};
    for (size_t g = 0; g < std::size(kGauges); ++g) {
      if (c[4 + g].empty()) continue;
      it.values.push_back({kGauges[g], kUnits[g], std::stod(c[4 + g]), MetricKind::kGauge});
      r.readings[kGauges[g]].push_back(std::stod(c[4 + g]));
    }
    if (!it.values.empty()) r.in.measured.push_back(std::move(it));
  }
  r.current = r.sel.Current();
  r.in.strata = &r.sel.strata();
  r.in.selection = &r.current;
  r.in.timed = r.sel.iterations();
}

}  // namespace

TEST_CASE("gauges on the H100's recorded readings: constant ones are exact, all in range") {
  for (const char* file : {"h100_gru_gauges.csv", "h100_transformer_gauges.csv"}) {
    INFO(std::string(file));
    Replayed r;
    Replay(file, r);
    REQUIRE(r.in.measured.size() > 90);
    const WholeRunEstimate e = EstimateWholeRun(r.in);
    for (size_t g = 0; g < std::size(kGauges); ++g) {
      INFO(kGauges[g]);
      const WholeRunProjection* p = e.Find(kGauges[g]);
      REQUIRE(p != nullptr);
      CHECK(p->kind == MetricKind::kGauge);
      const std::vector<double>& v = r.readings[kGauges[g]];
      const bool constant = std::all_of(v.begin(), v.end(), [&](double x) { return x == v[0]; });
      if (constant) {  // mem_total, mem_clock 2619 MHz, sm_clock 1980 MHz on this H100
        CHECK(p->low == v[0]);
        CHECK(p->total == v[0]);
        CHECK(p->high == v[0]);
        CHECK(p->bounded);
      }
      CHECK(p->low <= p->total);
      CHECK(p->total <= p->high);
      CHECK(p->low >= 0);
      if (std::string(kUnits[g]) == "%") CHECK(p->high <= 100);
    }
    for (const char* c : {"mem_total", "mem_clock", "sm_clock"}) {
      const std::vector<double>& v = r.readings[c];
      CHECK_MESSAGE(std::all_of(v.begin(), v.end(), [&](double x) { return x == v[0]; }), c);
    }
    // Utilisation moved: a real interval, inside 0..100.
    const WholeRunProjection* util = e.Find("util_gpu");
    CHECK(util->high > util->low);
  }
}

TEST_CASE("gauges on the H100's recorded readings: mean power against the trainer's own NVML") {
  // The trainer read NVML's total energy itself at each phase's end: energy / wall time is the
  // run's true mean power. The power gauge's interval must hold it.
  for (const char* file : {"h100_gru_gauges.csv", "h100_transformer_gauges.csv"}) {
    INFO(std::string(file));
    Replayed r;
    Replay(file, r);
    const WholeRunEstimate e = EstimateWholeRun(r.in);
    const WholeRunProjection* power = e.Find("power");
    REQUIRE(power != nullptr);
    const double truth = r.energy_mj * 1e-3 / (r.wall_ns * 1e-9);
    INFO("truth " << truth << " W, projected " << power->total << " [" << power->low << ", "
                  << power->high << "]");
    CHECK(power->low <= truth);
    CHECK(truth <= power->high);
    MESSAGE(std::string(file) << ": mean power " << power->total << " W [" << power->low << ", "
                              << power->high << "], trainer's NVML " << truth << " W");
  }
}

}  // namespace seqpoint::selector
