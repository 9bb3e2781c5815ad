// Energy on every iteration, replayed from real recorded data: the real RX 6900 XT gpu_metrics
// table (tests/data/gpu_metrics) read through the firmware-shim, its energy accumulator
// advanced at a known power, and the real powercap fixture (collectors/energy/testdata) near
// its counter's wrap; iteration windows are the recorded trainer trace's iteration times
// (tests/data/agent). The clock is injected, so time is data: nothing here is timed.
#include "agent/energy/energy_sampler.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>

#include "agent/energy/energy_attribution.h"
#include "agent/testing/gpu_energy_fixture.h"
#include "agent/testing/test_util.h"
#include "collectors/energy/gpu_metrics_energy.h"
#include "collectors/energy/rapl.h"
#include "collectors/registry.h"
#include "common/trace_csv.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
namespace fs = std::filesystem;

namespace {

using GpuNode = GpuEnergyNode;

// The recorded trainer's iteration times (ns), contiguous from t = 1 s.
std::vector<uint64_t> Boundaries(size_t iterations) {
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  const int col = trace->MetricIndex("time_ns");
  std::vector<uint64_t> t = {1'000'000'000};
  for (size_t r = 0; r < iterations; ++r) {
    t.push_back(t.back() + static_cast<uint64_t>(trace->metrics[col][r]));
  }
  return t;
}

}  // namespace

TEST_CASE("energy sampler: constant power on the real gpu_metrics table, per iteration and total") {
  GpuNode node;
  uint64_t now = 1'000'000'000;
  const double watts = 287.5;  // W = uJ/us; energy(t) = P * (t - t0)
  auto energy_at = [&](uint64_t t) {
    return watts * static_cast<double>(t - 1'000'000'000) * 1e-3;
  };
  auto sampler = EnergySampler::OpenSource(
      std::make_unique<seqpoint::collectors::GpuMetricsEnergySource>(node.sys),
      [&] { return now; });
  REQUIRE(sampler.ok());
  CHECK((*sampler)->Describe().find("gpu_metrics_v1_3") != std::string::npos);
  const std::vector<uint64_t> b = Boundaries(200);
  const uint64_t step = 50'000'000;  // 50 ms sampling
  size_t next = 0;
  std::vector<double> per_iter;
  // The loop: time advances in sampling steps; the firmware's counter follows; end records
  // are handled a poll interval late, as the daemon sees them.
  for (uint64_t t = b.front(); t + step <= b.back(); t += step) {
    now = t;
    node.SetMicrojoules(energy_at(now));
    (*sampler)->Sample();
    while (next + 1 < b.size() && b[next + 1] + 1'000'000'000 <= t) {
      std::optional<double> e = (*sampler)->EnergyBetween(b[next], b[next + 1]);
      REQUIRE(e.has_value());
      per_iter.push_back(*e);
      ++next;
    }
  }
  // The last ones arrive just after the last end, before the next tick: they wait for it
  // (the sampler never reads the counter on the iteration path).
  CHECK(!(*sampler)->Covers(b.back()));
  CHECK(!(*sampler)->EnergyBetween(b[next], b.back()).has_value());
  now = b.back() + 1'000'000;
  node.SetMicrojoules(energy_at(now));
  const uint64_t reads_before = (*sampler)->stats().reads;
  (*sampler)->Sample();
  while (next + 1 < b.size()) {
    std::optional<double> e = (*sampler)->EnergyBetween(b[next], b[next + 1]);
    REQUIRE(e.has_value());
    per_iter.push_back(*e);
    ++next;
  }
  REQUIRE(per_iter.size() == 200);
  CHECK((*sampler)->stats().reads == reads_before + 1);
  double sum = 0, worst = 0;
  for (size_t i = 0; i < per_iter.size(); ++i) {
    const double truth = energy_at(b[i + 1]) - energy_at(b[i]);
    worst = std::max(worst, std::fabs(per_iter[i] - truth));
    sum += per_iter[i];
  }
  // Constant power: exact but for the firmware's whole counts at the two samples around each
  // end (one count is 15.26 uJ).
  MESSAGE("worst per-iteration error " << worst << " uJ of ~" << per_iter[5] << " uJ");
  CHECK(worst <= 2 * node.count_uj());
  // Contiguous iterations telescope: the sum is the counter's rise over the whole window.
  const double total_truth = energy_at(b.back()) - energy_at(b.front());
  CHECK(std::fabs(sum - total_truth) <= 2 * node.count_uj());
  CHECK((*sampler)->stats().failures == 0);
}

TEST_CASE("energy sampler: a power step is resolved to the sampling interval") {
  GpuNode node;
  uint64_t now = 1'000'000'000;
  // 100 W until t = 3.37 s, then 400 W: the step falls inside a 50 ms bracket.
  const uint64_t step_at = 3'370'000'000;
  auto energy_at = [&](uint64_t t) {
    double low = 100.0 * static_cast<double>(std::min(t, step_at) - 1'000'000'000) * 1e-3;
    return low + (t > step_at ? 400.0 * static_cast<double>(t - step_at) * 1e-3 : 0.0);
  };
  auto sampler = EnergySampler::OpenSource(
      std::make_unique<seqpoint::collectors::GpuMetricsEnergySource>(node.sys),
      [&] { return now; });
  REQUIRE(sampler.ok());
  const uint64_t interval = 50'000'000;
  for (now = 1'000'000'000; now <= 6'000'000'000; now += interval) {
    node.SetMicrojoules(energy_at(now));
    (*sampler)->Sample();
  }
  const std::vector<uint64_t> b = Boundaries(12);
  double sum = 0;
  for (size_t i = 0; i + 1 < b.size(); ++i) {
    std::optional<double> e = (*sampler)->EnergyBetween(b[i], b[i + 1]);
    REQUIRE(e.has_value());
    const double truth = energy_at(b[i + 1]) - energy_at(b[i]);
    // The bound: the power change times one sampling interval, per end of the window.
    CHECK(std::fabs(*e - truth) <= (400.0 - 100.0) * 50'000 + 2 * node.count_uj());
    sum += *e;
  }
  CHECK(std::fabs(sum - (energy_at(b.back()) - energy_at(b.front()))) <=
        (400.0 - 100.0) * 50'000 + 2 * node.count_uj());
}

TEST_CASE(
    "energy sampler: a failed read, a pause and an old window give no energy, never a guess") {
  GpuNode node;
  uint64_t now = 1'000'000'000;
  auto sampler = EnergySampler::OpenSource(
      std::make_unique<seqpoint::collectors::GpuMetricsEnergySource>(node.sys),
      [&] { return now; });
  REQUIRE(sampler.ok());
  auto at = [&](uint64_t t, double uj) {
    now = t;
    node.SetMicrojoules(uj);
    (*sampler)->Sample();
  };
  at(1'050'000'000, 1e6);
  at(1'100'000'000, 2e6);
  fs::rename(node.file, node.file + ".gone");  // the GPU fell off the bus
  now = 1'150'000'000;
  (*sampler)->Sample();
  CHECK((*sampler)->stats().failures == 1);
  fs::rename(node.file + ".gone", node.file);
  at(1'200'000'000, 4e6);
  at(1'250'000'000, 5e6);
  CHECK((*sampler)->EnergyBetween(1'060'000'000, 1'090'000'000).has_value());
  CHECK(!(*sampler)->EnergyBetween(1'060'000'000, 1'210'000'000).has_value());  // spans it
  auto after = (*sampler)->EnergyBetween(1'200'000'000, 1'250'000'000);
  REQUIRE(after.has_value());
  CHECK(*after == doctest::Approx(1e6).epsilon(1e-4));
  // A pause (no process watched) then a resumed sample: nothing interpolates over the gap.
  (*sampler)->Pause();
  at(9'000'000'000, 9e6);
  at(9'050'000'000, 10e6);
  CHECK(!(*sampler)->EnergyBetween(1'240'000'000, 9'010'000'000).has_value());
  CHECK((*sampler)->EnergyBetween(9'010'000'000, 9'040'000'000).has_value());
  // Older than the ring.
  node.SetMicrojoules(11e6);  // once: a rewrite per sample is 8192 renames on a busy disk
  for (size_t i = 0; i < EnergySampler::kRingSamples; ++i) {
    now = 9'100'000'000 + i * 1000;
    (*sampler)->Sample();
  }
  CHECK(!(*sampler)->EnergyBetween(9'010'000'000, 9'040'000'000).has_value());
  CHECK(!(*sampler)->EnergyBetween(5, 4).has_value());  // end before begin
}

TEST_CASE("energy sampler: RAPL powercap fixture across its counter's wrap") {
  TempDir dir;
  const std::string sys = dir.path() + "/sys";
  fs::create_directories(sys);
  fs::copy(SourceDir() + "/collectors/energy/testdata/powercap/class", sys + "/class",
           fs::copy_options::recursive);
  const std::string counter = sys + "/class/powercap/intel-rapl:0/energy_uj";
  const uint64_t max_range = 262143328850;  // max_energy_range_uj of the fixture
  const uint64_t start = 240422366267;      // energy_uj of the fixture
  uint64_t now = 1'000'000'000;
  const double watts = 180;
  // Raw counter at time t: wraps to 0 after max_range (drivers/powercap/intel_rapl_common.c).
  auto raw_at = [&](uint64_t t) {
    const uint64_t uj =
        start + static_cast<uint64_t>(watts * static_cast<double>(t - 1'000'000'000) * 1e-3);
    return uj > max_range ? uj - max_range - 1 : uj;
  };
  auto set = [&](uint64_t t) {
    now = t;
    std::ofstream(counter) << raw_at(t) << "\n";
  };
  set(now);
  auto sampler = EnergySampler::OpenSource(
      std::make_unique<seqpoint::collectors::RaplEnergySource>(sys), [&] { return now; });
  REQUIRE(sampler.ok());
  // The wrap comes after (max - start) / 180 W = 120.7 s.
  const uint64_t wrap_s = static_cast<uint64_t>(double(max_range - start) / watts * 1e-6);
  for (uint64_t t = 1'000'000'000 + (wrap_s - 1) * 1'000'000'000;
       t <= 1'000'000'000 + (wrap_s + 1) * 1'000'000'000; t += 100'000'000) {
    set(t);
    (*sampler)->Sample();
  }
  const uint64_t across_begin = 1'000'000'000 + (wrap_s - 1) * 1'000'000'000 + 250'000'000;
  const uint64_t across_end = across_begin + 1'500'000'000;
  REQUIRE(raw_at(across_end) < raw_at(across_begin));  // the raw counter wrapped inside
  std::optional<double> e = (*sampler)->EnergyBetween(across_begin, across_end);
  REQUIRE(e.has_value());
  CHECK(*e == doctest::Approx(watts * 1.5e6).epsilon(1e-6));  // 270 J, wrap corrected
}

TEST_CASE("energy sampler: sources tried in collectors.energy.sources order") {
  GpuNode node;
  seqpoint::collectors::CollectorConfig c;
  c.sysfs_root = node.sys;
  c.nvml.library = "/nonexistent/libnvidia-ml.so.1";
  c.energy.sources = {"rapl", "nvml", "gpu_metrics"};
  auto s = EnergySampler::Open(c, seqpoint::collectors::EnergySourceRegistry());
  REQUIRE(s.ok());
  CHECK((*s)->source_name() == "gpu_metrics");
  c.energy.sources = {"rapl", "nvml"};
  auto none = EnergySampler::Open(c, seqpoint::collectors::EnergySourceRegistry());
  REQUIRE(!none.ok());
  CHECK(none.status().message().find("rapl:") != std::string::npos);
  CHECK(none.status().message().find("nvml:") != std::string::npos);
}

namespace {

// The pieces' total weighted length: the iteration's share of the window at constant power.
double Weighted(const std::vector<EnergyPiece>& pieces) {
  double w = 0;
  for (const EnergyPiece& p : pieces) w += static_cast<double>(p.to_ns - p.from_ns) * p.weight;
  return w;
}

}  // namespace

TEST_CASE("energy attribution: a run alone owns the node's energy, overlapping runs share it") {
  EnergyAttribution a;
  std::vector<EnergyPiece> pieces;
  a.ProcessFound(100, 1, 1000);
  a.IterationTimed(100, 1, 2000, 3000);
  // Alone: the whole window, one piece.
  REQUIRE(a.Share(1, 100, false, 2000, 3000, &pieces) == EnergyAttribution::Outcome::kReady);
  REQUIRE(pieces.size() == 1);
  CHECK(pieces[0].weight == 1);
  // Another run's process: until it has reported past the window, the share is not known.
  a.ProcessFound(200, 2, 3500);
  a.IterationTimed(100, 1, 4000, 6000);
  CHECK(a.Share(1, 100, false, 4000, 6000, &pieces) == EnergyAttribution::Outcome::kWait);
  a.IterationTimed(200, 2, 5000, 7000);  // overlaps [5000, 6000]
  REQUIRE(a.Share(1, 100, false, 4000, 6000, &pieces) == EnergyAttribution::Outcome::kReady);
  CHECK(Weighted(pieces) == doctest::Approx(1000 + 1000 * 0.5));
  // Run 2's iteration: half of [5000, 6000], all of [6000, 7000] once run 1 reported past it.
  CHECK(a.Share(2, 200, false, 5000, 7000, &pieces) == EnergyAttribution::Outcome::kWait);
  a.IterationTimed(100, 1, 6500, 7500);
  REQUIRE(a.Share(2, 200, false, 5000, 7000, &pieces) == EnergyAttribution::Outcome::kReady);
  CHECK(Weighted(pieces) == doctest::Approx(500 + 500 + 500 * 0.5));
  // Together they never get more than the node: over [4000, 7500] the node gives 3500.
  double sum = 0;
  a.IterationTimed(200, 2, 7600, 7700);  // run 2 reported past every window
  for (auto [run, pid, b, e] :
       {std::tuple{1, 100, 4000, 6000}, {2, 200, 5000, 7000}, {1, 100, 6500, 7500}}) {
    REQUIRE(a.Share(run, pid, false, b, e, &pieces) == EnergyAttribution::Outcome::kReady);
    sum += Weighted(pieces);
  }
  CHECK(sum == doctest::Approx(3500));
  // An exited process's iterations are complete: no wait.
  a.ProcessExited(200, 8000);
  a.IterationTimed(100, 1, 8500, 9000);
  REQUIRE(a.Share(1, 100, false, 8500, 9000, &pieces) == EnergyAttribution::Outcome::kReady);
  CHECK(Weighted(pieces) == doctest::Approx(500));
}

TEST_CASE("energy attribution: a step is its run's whole part, a run's processes share its part") {
  EnergyAttribution a;
  std::vector<EnergyPiece> pieces;
  a.ProcessFound(100, 1, 1000);
  a.ProcessFound(101, 1, 1000);  // two ranks of run 1
  a.IterationTimed(100, 1, 2000, 3000);
  a.IterationTimed(101, 1, 2000, 3000);
  // As a step: the run's whole part, never divided by its ranks.
  REQUIRE(a.Share(1, 100, true, 2000, 3000, &pieces) == EnergyAttribution::Outcome::kReady);
  CHECK(Weighted(pieces) == doctest::Approx(1000));
  // As rank-iterations of a run fed without a join: each rank half.
  REQUIRE(a.Share(1, 100, false, 2000, 3000, &pieces) == EnergyAttribution::Outcome::kReady);
  CHECK(Weighted(pieces) == doctest::Approx(500));
  // Another run iterating over the second half: the step gets all of the first half and half
  // of the second.
  a.ProcessFound(200, 2, 1500);
  a.IterationTimed(200, 2, 2500, 3200);
  REQUIRE(a.Share(1, 100, true, 2000, 3000, &pieces) == EnergyAttribution::Outcome::kReady);
  CHECK(Weighted(pieces) == doctest::Approx(500 + 250));
  a.ProcessExited(101, 4000);
  a.ProcessExited(200, 4000);
  // 100's next iteration may begin right after its last (3000): the exited ones still share it.
  a.Prune(5000);
  CHECK(a.spans() == 3);
  a.IterationTimed(100, 1, 6000, 7000);
  a.Prune(8000);
  CHECK(a.spans() == 1);
  CHECK(a.iterations() == 1);  // 100's latest only
}

TEST_CASE(
    "energy sampler: Covers says whether an end is sampled past, and each sample calls back") {
  GpuNode node;
  uint64_t now = 1'000'000'000;
  auto sampler = EnergySampler::OpenSource(
      std::make_unique<seqpoint::collectors::GpuMetricsEnergySource>(node.sys),
      [&] { return now; });
  REQUIRE(sampler.ok());
  int callbacks = 0;
  (*sampler)->set_on_sample([&] { ++callbacks; });
  CHECK((*sampler)->Covers(now));
  CHECK(!(*sampler)->Covers(now + 1));  // an end after the last sample waits for the next one
  now += 10'000'000;
  node.SetMicrojoules(1'000);
  (*sampler)->Sample();
  CHECK(callbacks == 1);
  CHECK((*sampler)->Covers(now - 5'000'000));
  // EnergyBetween never reads: an end past the last sample has no energy yet.
  const uint64_t last = now;
  now += 1'000'000;
  CHECK(!(*sampler)->EnergyBetween(last - 1'000, last + 500'000).has_value());
  CHECK(callbacks == 1);
  CHECK((*sampler)->stats().reads == 2);  // the calibration's last read, then the Sample
}
