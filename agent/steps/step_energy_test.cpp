// The energy of a data-parallel run's steps (issue: DDP energy came out k times too low): a step
// stands for every rank, so it gets the node's whole energy over the step, never 1/k of it; a
// run of one process keeps its iterations' energy; two runs share the node's energy where their
// iterations overlap in time, and an iteration whose sharers never report is refused (counted,
// never guessed). The energy counter is a stand-in that draws a constant 250 W on a clock the
// test moves, so the node's energy over any window is known.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>

#include "agent/runs/run_manager.h"
#include "agent/testing/test_util.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;

namespace {

constexpr double kWatts = 250;

struct FakeClock {
  uint64_t now = 0;
};

// A cumulative counter at kWatts: uJ = W * ns / 1000.
class ConstantPower : public seqpoint::collectors::EnergySource {
 public:
  explicit ConstantPower(FakeClock* clock) : clock_(clock) {}
  std::string_view name() const override { return "constant"; }
  seqpoint::Status Open() override { return seqpoint::Status::Ok(); }
  seqpoint::Result<double> ReadMicrojoules() override {
    return kWatts * static_cast<double>(clock_->now) / 1e3;
  }

 private:
  FakeClock* clock_;
};

struct Node {
  TempDir dir;
  std::unique_ptr<Store> store;
  FakeClock clock;
  std::unique_ptr<EnergySampler> sampler;
  std::unique_ptr<RunManager> runs;

  Node() {
    auto s = Store::Open(dir.File("state.db"));
    REQUIRE(s.ok());
    store = std::move(*s);
    RunManagerOptions o;
    o.group_by = *ParseRunGroupBy("pid");
    o.selector.budget_count = 8;
    runs = std::make_unique<RunManager>(store.get(), nullptr, o);
  }
  // After the processes are announced: the attribution's spans start at the real clock.
  void StartSampler() {
    clock.now = MonotonicNowNs() + 1'000'000;
    auto s = EnergySampler::OpenSource(std::make_unique<ConstantPower>(&clock),
                                       [this] { return clock.now; });
    REQUIRE(s.ok());
    sampler = std::move(*s);
    runs->set_energy_sampler(sampler.get());
  }
  // Every rank runs iteration `iter` over [t, t + len]; the rank r starts r ms late.
  // Returns the node's energy over the step (first begin to last end), in uJ.
  double Step(const std::vector<pid_t>& ranks, uint64_t iter, uint64_t len_ns) {
    const uint64_t t = clock.now;
    for (size_t r = 0; r < ranks.size(); ++r) {
      runs->OnIterationBegin({ranks[r], ranks[r], iter, 64, 8, 512, t + r * 1'000'000});
    }
    const uint64_t last_end = t + (ranks.size() - 1) * 1'000'000 + len_ns;
    clock.now = last_end + 1'000'000;
    sampler->Sample();  // the periodic sample after the step
    for (size_t r = 0; r < ranks.size(); ++r) {
      const uint64_t b = t + r * 1'000'000;
      runs->OnIterationEnd({ranks[r], ranks[r], iter, 64, 8, 512, b, b + len_ns, true});
    }
    return kWatts * static_cast<double>(last_end - t) / 1e3;
  }
  double EnergySum(const std::string& key) {
    RunTracker* t = runs->FindActive(key);
    REQUIRE(t != nullptr);
    double sum = 0;
    for (const HistogramBin& b : t->Snapshot().histogram) sum += b.energy_uj_sum;
    return sum;
  }
};

}  // namespace

TEST_CASE("step energy: a data-parallel step gets the node's whole energy, for 2 and 4 ranks") {
  for (int k : {2, 4}) {
    CAPTURE(k);
    Node n;
    std::vector<pid_t> ranks;
    for (int r = 0; r < k; ++r) {
      ranks.push_back(7100 + r);
      n.runs->OnProcessFound(ProcessInfo{ranks.back(), 1, "rank", "ddp-job"});
    }
    REQUIRE(n.runs->step_join(n.runs->FindActive("ddp-job")->record().id) != nullptr);
    n.StartSampler();
    double node = 0;
    for (uint64_t i = 0; i < 20; ++i) node += n.Step(ranks, i, 40'000'000 + i * 1'000'000);
    RunTracker* t = n.runs->FindActive("ddp-job");
    CHECK(t->record().iterations == 20);  // steps, not rank-iterations
    CHECK(t->energy_iterations() == 20);
    // Each step's energy is the node's over the step: within the sampler's interpolation
    // (exact here: constant power), and not node / k.
    CHECK(n.EnergySum("ddp-job") == doctest::Approx(node).epsilon(1e-9));
  }
}

TEST_CASE("step energy: a run of one process keeps its iterations' energy") {
  Node n;
  n.runs->OnProcessFound(ProcessInfo{7200, 1, "solo", "solo-job"});
  n.StartSampler();
  double node = 0;
  for (uint64_t i = 0; i < 10; ++i) node += n.Step({7200}, i, 30'000'000);
  CHECK(n.EnergySum("solo-job") == doctest::Approx(node).epsilon(1e-9));
  CHECK(n.runs->energy_parked() == 0);
}

TEST_CASE("step energy: two runs share the node's energy where their iterations overlap") {
  Node n;
  n.runs->OnProcessFound(ProcessInfo{7200, 1, "a", "run-a"});
  n.runs->OnProcessFound(ProcessInfo{7300, 1, "b", "run-b"});
  n.StartSampler();
  // a runs [t, t+30 ms], b [t+10, t+40 ms]: each has 10 ms alone and shares 20 ms, so each
  // iteration's energy is that of 20 ms of the node, and together 40 ms: the node's over both.
  constexpr uint64_t kMs = 1'000'000;
  constexpr int kIters = 12;
  for (uint64_t i = 0; i < kIters; ++i) {
    const uint64_t t = n.clock.now;
    n.runs->OnIterationBegin({7200, 7200, i, 64, 8, 512, t});
    n.runs->OnIterationBegin({7300, 7300, i, 64, 8, 512, t + 10 * kMs});
    n.clock.now = t + 41 * kMs;
    n.sampler->Sample();  // settles what the previous ends made known
    n.runs->OnIterationEnd({7200, 7200, i, 64, 8, 512, t, t + 30 * kMs, true});
    n.runs->OnIterationEnd({7300, 7300, i, 64, 8, 512, t + 10 * kMs, t + 40 * kMs, true});
  }
  n.clock.now += kMs;
  n.sampler->Sample();
  // a's last iteration is known once b reported past it; b's last waits for a's next.
  const double per_iteration = kWatts * 20.0 * kMs / 1e3;
  CHECK(n.runs->FindActive("run-a")->energy_iterations() == kIters);
  CHECK(n.runs->FindActive("run-b")->energy_iterations() == kIters - 1);
  CHECK(n.runs->energy_parked() == 1);
  CHECK(n.EnergySum("run-a") == doctest::Approx(kIters * per_iteration).epsilon(1e-9));
  CHECK(n.EnergySum("run-b") == doctest::Approx((kIters - 1) * per_iteration).epsilon(1e-9));
  CHECK(n.runs->FindActive("run-a")->energy_shared() == 0);
  CHECK(n.runs->FindActive("run-b")->energy_shared() == 0);
  // b's last is settled when b closes: a reported nothing past it, so it is refused, counted.
  n.runs->OnProcessExit(ProcessExit{7300, false, 0, std::nullopt});
  CHECK(n.runs->energy_parked() == 0);
}

TEST_CASE("step energy: a run that never reports refuses the other's energy only after a wait") {
  Node n;
  n.runs->OnProcessFound(ProcessInfo{7200, 1, "solo", "solo-job"});
  n.runs->OnProcessFound(ProcessInfo{7300, 1, "idle", "idle-job"});  // loads, never iterates
  n.StartSampler();
  for (uint64_t i = 0; i < 4; ++i) (void)n.Step({7200}, i, 30'000'000);
  // Whose is the energy? Not known while the other run may still report an iteration in it.
  CHECK(n.EnergySum("solo-job") == 0);
  CHECK(n.runs->energy_parked() == 4);
  CHECK(n.runs->FindActive("solo-job")->energy_shared() == 0);
  // Past the wait: refused, counted as shared, never guessed.
  n.clock.now += EnergyAttribution::kShareWaitNs + 1'000'000;
  n.sampler->Sample();
  CHECK(n.runs->energy_parked() == 0);
  CHECK(n.runs->FindActive("solo-job")->energy_shared() == 4);
  CHECK(n.EnergySum("solo-job") == 0);
  // Once it exits, the node is the solo run's again.
  n.runs->OnProcessExit(ProcessExit{7300, false, 0, std::nullopt});
  double node = 0;
  for (uint64_t i = 4; i < 8; ++i) node += n.Step({7200}, i, 30'000'000);
  CHECK(n.EnergySum("solo-job") == doctest::Approx(node).epsilon(1e-9));
  CHECK(n.runs->FindActive("solo-job")->energy_shared() == 4);
}

TEST_CASE("step energy: an iteration that ends after the last sample waits for the next one") {
  Node n;
  n.runs->OnProcessFound(ProcessInfo{7400, 1, "solo", "parked-job"});
  n.StartSampler();
  const uint64_t reads = n.sampler->stats().reads;
  // The end record arrives before the sampler's next periodic sample: no counter read on the
  // iteration path, the iteration is parked.
  const uint64_t b = n.clock.now + 1'000'000;
  const uint64_t e = b + 20'000'000;
  n.clock.now = e + 500'000;
  n.runs->OnIterationBegin({7400, 7400, 0, 64, 8, 512, b});
  n.runs->OnIterationEnd({7400, 7400, 0, 64, 8, 512, b, e, true});
  CHECK(n.sampler->stats().reads == reads);
  CHECK(n.runs->energy_parked() == 1);
  CHECK(n.EnergySum("parked-job") == 0);
  CHECK(n.runs->FindActive("parked-job")->energy_iterations() == 0);
  // The next periodic sample settles it: the node's energy over the iteration.
  n.clock.now += 10'000'000;
  n.sampler->Sample();
  CHECK(n.runs->energy_parked() == 0);
  CHECK(n.EnergySum("parked-job") == doctest::Approx(kWatts * 20'000'000 / 1e3).epsilon(1e-9));
  CHECK(n.runs->FindActive("parked-job")->energy_iterations() == 1);
  // If it was measured, its measurement rows have the energy too.
  auto rows = n.runs->FindActive("parked-job")->TakeNewMeasurements();
  bool timed = false, has = false;
  for (const Measurement& m : rows) {
    timed = timed || m.metric == "time_ns";
    has = has || m.metric == "energy_uj";
  }
  CHECK(has == timed);
}

TEST_CASE("step energy: a measured iteration parked for its energy gets the energy row") {
  Node n;
  n.runs->OnProcessFound(ProcessInfo{7500, 1, "solo", "parked-measured"});
  n.StartSampler();
  size_t timed = 0, with_energy = 0;
  for (uint64_t i = 0; i < 40; ++i) {
    const uint64_t b = n.clock.now + 1'000'000;
    const uint64_t e = b + 20'000'000;
    n.clock.now = e + 500'000;
    n.runs->OnIterationBegin({7500, 7500, i, 64, 8, 512, b});
    n.runs->OnIterationEnd({7500, 7500, i, 64, 8, 512, b, e, true});  // parked
    n.clock.now += 10'000'000;
    n.sampler->Sample();  // settled
  }
  for (const Measurement& m : n.runs->FindActive("parked-measured")->TakeNewMeasurements()) {
    timed += m.metric == "time_ns";
    if (m.metric == "energy_uj") {
      ++with_energy;
      CHECK(m.value == doctest::Approx(kWatts * 20'000'000 / 1e3).epsilon(1e-9));
    }
  }
  CHECK(timed > 0);
  CHECK(with_energy == timed);
  CHECK(n.runs->energy_parked() == 0);
}
