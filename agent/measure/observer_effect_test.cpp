// Observer-effect detection on the recorded trainer trace (tests/data/agent: real iteration
// times with the real contention noise and drift of a loaded 2-core VM). The measured
// iterations are made slower by a known factor, as a perturbing collector would make them;
// everything else is the data. Nothing here is timed.
#include "agent/measure/observer_effect.h"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>

#include "agent/runs/run_manager.h"
#include "agent/runs/run_tracker.h"
#include "agent/testing/test_harness.h"
#include "agent/testing/test_util.h"
#include "common/clock.h"
#include "common/trace_csv.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

const seqpoint::Trace& Recorded() {
  static const seqpoint::Trace trace = [] {
    auto t = seqpoint::LoadTrace(RecordedTrace());
    REQUIRE(t.ok());
    return std::move(*t);
  }();
  return trace;
}

// Feeds the whole trace; a collector-measured iteration holding perf group g takes slowdown(g)
// times its recorded time, and so does its task clock (controls run untouched).
// The estimate is consulted after every iteration, as RunManager does (a flag, once raised,
// stays: so this also counts flags raised at any point of the run).
std::unique_ptr<RunTracker> Feed(const std::function<double(uint32_t)>& slowdown,
                                 uint32_t groups = 1, uint64_t budget = 64, pid_t pid = 42) {
  const seqpoint::Trace& t = Recorded();
  seqpoint::selector::OnlineOptions o;
  o.budget_count = budget;
  o.counter_groups = groups;
  RunRecord record;
  record.id = 1;
  record.key = "k";
  auto tracker = RunTracker::Create(record, o);
  REQUIRE(tracker.ok());
  const int time = t.MetricIndex("time_ns"), task = t.MetricIndex("task_clock_ns");
  uint64_t clock = 1'000'000;
  for (size_t r = 0; r < t.rows(); ++r) {
    auto d = (*tracker)->Decide(pid, t.iter[r], t.seq_len[r], t.batch[r], t.tokens[r]);
    const bool treated = d.measure && !(*tracker)->IsControl(pid, t.iter[r]);
    const double f = treated ? slowdown(d.group) : 1.0;
    std::vector<seqpoint::collectors::Sample> values;
    if (treated) {
      values.push_back({"perf:task-clock", t.metrics[task][r] * f, "ns"});
      values.push_back({"group:perf", static_cast<double>(d.group), "group"});
    }
    const uint64_t dt = static_cast<uint64_t>(t.metrics[time][r] * f);
    (*tracker)->Complete(pid, t.iter[r], t.seq_len[r], t.batch[r], t.tokens[r], clock, clock + dt,
                         values, 150.0 * static_cast<double>(dt) * 1e-3);  // 150 W node
    clock += dt + 1000;
    (void)(*tracker)->observer_effect(0.05);
  }
  return std::move(*tracker);
}

const Projection* Find(const RunSnapshot& s, const std::string& metric) {
  for (const Projection& p : s.projections) {
    if (p.metric == metric) return &p;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("observer effect: the median's interval comes from binomial order statistics") {
  ObserverEstimate e = EstimateRatio({9, 1, 8, 2, 7, 3, 6, 4, 5});
  CHECK(e.pairs == 9);
  CHECK(e.ratio == 5);
  CHECK(e.low == 2);  // P(B(9, 1/2) <= 1) = 1.95% <= 2.5% < P(B <= 2): the 2nd order statistic
  CHECK(e.high == 8);
  CHECK(e.valid);
  ObserverEstimate few = EstimateRatio({1.5, 1.6, 1.7});
  CHECK(!few.valid);  // under kObserverMinPairs: never flagged
  CHECK(few.low == 1.5);
  CHECK(EstimateRatio({}).pairs == 0);
}

TEST_CASE("observer effect: controls are one in N chosen iterations, at random positions") {
  int controls = 0, first_position = 0;
  for (uint64_t v = 0; v < 4000; ++v) {
    if (IsControlVisit(v, 4, 42)) {
      ++controls;
      if (v < 4) first_position = static_cast<int>(v);
    }
  }
  CHECK(controls == 1000);  // exactly one per block of 4
  int moved = 0;
  for (uint64_t v = 0; v < 4000; v += 4) moved += !IsControlVisit(v + first_position, 4, 42);
  CHECK(moved > 500);  // not the same position in every block
  CHECK(!IsControlVisit(3, 0, 42));
  CHECK(!IsControlVisit(3, 1, 42));
}

TEST_CASE("observer effect: +40% on measured iterations of the recorded trace is flagged") {
  auto clean = Feed([](uint32_t) { return 1.0; });
  auto slow = Feed([](uint32_t) { return 1.4; });
  const ObserverEffect& a = clean->observer_effect(0.05);
  const ObserverEffect& b = slow->observer_effect(0.05);
  MESSAGE("0%: ratio " << a.all.ratio << " [" << a.all.low << ", " << a.all.high << "], "
                       << a.all.pairs << " pairs; +40%: ratio " << b.all.ratio << " [" << b.all.low
                       << ", " << b.all.high << "]");
  CHECK(a.all.valid);
  CHECK(!a.flagged);  // real noise (cv ~0.7 per iteration, 3x drift), no false flag
  CHECK(a.all.low <= 1.0);
  CHECK(a.all.high >= 1.0);
  CHECK(b.flagged);
  CHECK(b.all.low > 1.05);
  // The same pairs, x1.4 (up to the SL means the ratios are taken against, which include the
  // slowed iterations in b).
  CHECK(b.all.ratio == doctest::Approx(1.4 * a.all.ratio).epsilon(0.02));
  CHECK(b.FlaggedCollectors() == std::vector<std::string>{"perf"});

  // Time and energy projections are corrected by the estimated slowdown: the unperturbed
  // run's projection lies in the corrected interval, and they are not marked perturbed.
  RunSnapshot sa = clean->Snapshot(), sb = slow->Snapshot();
  for (const char* m : {"time_ns", "energy_uj"}) {
    REQUIRE(Find(sa, m) != nullptr);
    REQUIRE(Find(sb, m) != nullptr);
    MESSAGE(std::string(m) << ": clean " << Find(sa, m)->total << ", perturbed and corrected "
                           << Find(sb, m)->total << " [" << Find(sb, m)->low << ", "
                           << Find(sb, m)->high << "]");
    CHECK(Find(sb, m)->low <= Find(sa, m)->total);
    CHECK(Find(sb, m)->high >= Find(sa, m)->total);
    CHECK(!Find(sb, m)->perturbed);
  }
  // A collector's own metric comes from the perturbed iterations: marked, not corrected.
  CHECK(Find(sb, "perf:task-clock")->perturbed);
  CHECK(!Find(sa, "perf:task-clock")->perturbed);
  // The self-checks compare like with like: the actual less the estimated excess is close to
  // the unperturbed run's actual (the measured iterations are 3% of the run).
  auto ca = clean->self_checks(), cb = slow->self_checks();
  REQUIRE(ca.size() == 2);
  REQUIRE(cb.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(ca[i].metric == (i == 0 ? "time_ns" : "energy_uj"));
    CHECK(ca[i].observer_excess == 0);
    CHECK(ca[i].observer_ratio == 1);
    CHECK(cb[i].actual > ca[i].actual);  // the measured iterations really took longer
    CHECK(cb[i].observer_ratio == doctest::Approx(b.all.ratio));
    CHECK(cb[i].actual - cb[i].observer_excess == doctest::Approx(ca[i].actual).epsilon(0.01));
    MESSAGE(ca[i].metric << " self-check: clean " << ca[i].error << ", perturbed " << cb[i].error);
  }
  // Energy at constant power tracks time: the same self-check figure.
  CHECK(ca[1].error == doctest::Approx(ca[0].error).epsilon(1e-3));
}

TEST_CASE("observer effect: over 40 draws of the controls, no false flag, +40% found") {
  // The draw of control positions is the only randomness: every pid draws anew. A budget of
  // 160 gives about 40 pairs: the sequential test needs about 10 pairs that all lie above the
  // threshold, or more pairs mostly above it, on this trace's noise (cv ~0.7 per iteration).
  int false_flags = 0, found = 0;
  double lowest_found = 10;
  for (pid_t pid = 1000; pid < 1040; ++pid) {
    false_flags += Feed([](uint32_t) { return 1.0; }, 1, 160, pid)->observer_effect(0.05).flagged;
    const ObserverEffect& oe =
        Feed([](uint32_t) { return 1.4; }, 1, 160, pid)->observer_effect(0.05);
    found += oe.flagged;
    lowest_found = std::min(lowest_found, oe.all.ratio);
  }
  MESSAGE("0%: " << false_flags << "/40 flagged; +40%: " << found << "/40 flagged, lowest ratio "
                 << lowest_found);
  CHECK(false_flags == 0);  // at most 1% of runs, over every look of the run
  CHECK(found >= 30);
}

TEST_CASE("observer effect: the sequential evidence starts at 1 and is always valid") {
  CHECK(SignTestEvidence(0, 0) == 1);
  CHECK(SignTestEvidence(9, 9) == doctest::Approx(102.3).epsilon(0.01));  // (2^10 - 1) / 10
  CHECK(SignTestEvidence(8, 9) < 100);
  CHECK(SignTestEvidence(0, 50) == doctest::Approx(1.0 / 51));  // the mixture's floor
  // Ville's inequality, checked: under the null (each pair above the threshold with chance 1/2),
  // the share of runs whose evidence EVER reaches 1/a, looked at after every pair for 1,000
  // pairs, stays at or below a (a = 10% here so that 1,000 runs can show it).
  std::mt19937_64 rng(20261126);
  int crossed = 0;
  for (int run = 0; run < 1000; ++run) {
    uint64_t above = 0;
    for (uint64_t n = 1; n <= 1000; ++n) {
      above += rng() & 1;
      if (SignTestEvidence(above, n) >= 10) {
        ++crossed;
        break;
      }
    }
  }
  MESSAGE("null runs ever flagged at a = 10%: " << crossed << " of 1000");
  CHECK(crossed <= 100 + 3 * 10);  // 10% of 1000, plus 3 binomial standard deviations
}

TEST_CASE("observer effect: only the counter group that perturbs is flagged") {
  auto t = Feed([](uint32_t g) { return g == 1 ? 1.4 : 1.0; }, /*groups=*/2, /*budget=*/256);
  const ObserverEffect& oe = t->observer_effect(0.05);
  REQUIRE(oe.by_group.size() == 2);
  MESSAGE("perf#0 " << oe.by_group[0].ratio << " [" << oe.by_group[0].low << ", "
                    << oe.by_group[0].high << "] " << oe.by_group[0].pairs << " pairs, perf#1 "
                    << oe.by_group[1].ratio << " [" << oe.by_group[1].low << ", "
                    << oe.by_group[1].high << "] " << oe.by_group[1].pairs << " pairs");
  CHECK(oe.by_group[0].group == "perf#0");
  CHECK(!oe.by_group[0].flagged);
  CHECK(oe.by_group[1].group == "perf#1");
  CHECK(oe.by_group[1].flagged);
  CHECK(oe.SlowdownOf({"perf#1"}) == &oe.by_group[1]);
  CHECK(oe.SlowdownOf({"perf#0"}) == nullptr);
  // A stored run gives the same estimate from its measurement rows and histogram.
  RunSnapshot snap = t->Snapshot();
  std::map<uint32_t, double> ref;
  for (const HistogramBin& b : snap.histogram) ref[b.seq_len] = b.time_ns_sum / b.count;
  auto stored = EstimateObserverEffect(
      PairControls(TimingsFrom(t->TakeNewMeasurements()), [&](uint32_t sl) { return ref[sl]; }),
      0.05);
  CHECK(stored.all.ratio == doctest::Approx(oe.all.ratio));
  CHECK(stored.by_group.size() == 2);
  CHECK(stored.by_group[1].flagged);
}

namespace {

// A collector that marks when it is measuring; the test's replayed "process" runs slower while
// it is (a perturbing collector, e.g. hardware counters that trap on every context switch).
struct Perturbation {
  bool active = false;
  uint64_t begins = 0;
};
class PerturbingCollector : public seqpoint::collectors::Collector {
 public:
  explicit PerturbingCollector(Perturbation* p) : p_(p) {}
  std::string_view name() const override { return "trap"; }
  seqpoint::Status Open(const seqpoint::collectors::Target&) override {
    return seqpoint::Status::Ok();
  }
  seqpoint::Status Begin() override {
    p_->active = true;
    ++p_->begins;
    return seqpoint::Status::Ok();
  }
  seqpoint::Result<std::vector<seqpoint::collectors::Sample>> End() override {
    p_->active = false;
    return std::vector<seqpoint::collectors::Sample>{{"trap:events", 1, "count"}};
  }
  void Close() override { p_->active = false; }

 private:
  Perturbation* p_;
};

}  // namespace

TEST_CASE(
    "observer effect: action drop stops the perturbing collector in its run, node-wide only "
    "when asked, and then until it expires") {
  for (const int64_t node_drop_s : {int64_t{0}, int64_t{3600}}) {
    CAPTURE(node_drop_s);
    seqpoint::FakeClock fake;  // the node-wide drop's expiry is on the wall clock
    TempDir dir;
    auto store = Store::Open(dir.File("state.db"));
    REQUIRE(store.ok());
    Perturbation perturbation;
    RunManagerOptions o;
    o.group_by = *ParseRunGroupBy("pid");
    o.selector.budget_count = 128;
    o.observer_drop = true;
    o.observer_node_drop_s = node_drop_s;
    RunManager runs(
        store->get(),
        [&] {
          std::vector<std::unique_ptr<seqpoint::collectors::Collector>> v;
          v.push_back(std::make_unique<PerturbingCollector>(&perturbation));
          return v;
        },
        o);
    const seqpoint::Trace& t = Recorded();
    const int time = t.MetricIndex("time_ns");
    const pid_t pid = 4242;
    runs.OnProcessFound(ProcessInfo{pid, 1, "replay", "drop-test"});
    uint64_t clock = 1'000'000, begins_at_drop = 0;
    size_t dropped_at = 0;
    for (size_t r = 0; r < t.rows(); ++r) {
      const uint64_t tokens = static_cast<uint64_t>(t.tokens[r]);
      runs.OnIterationBegin({pid, pid, t.iter[r], t.seq_len[r], t.batch[r], tokens, clock});
      const double f = perturbation.active ? 1.4 : 1.0;  // the process runs slower while trapped
      const uint64_t end = clock + static_cast<uint64_t>(t.metrics[time][r] * f);
      runs.OnIterationEnd(
          {pid, pid, t.iter[r], t.seq_len[r], t.batch[r], tokens, clock, end, true});
      clock = end + 1000;
      RunTracker* tracker = runs.FindActive("drop-test");
      REQUIRE(tracker != nullptr);
      if (dropped_at == 0 && tracker->dropped_collectors().count("trap")) {
        dropped_at = r;
        begins_at_drop = perturbation.begins;
      }
    }
    RunTracker* tracker = runs.FindActive("drop-test");
    REQUIRE(tracker != nullptr);
    MESSAGE("dropped after row " << dropped_at << ", " << begins_at_drop << " measurements of "
                                 << tracker->measured_iterations());
    REQUIRE(dropped_at > 0);
    CHECK(tracker->dropped_collectors() == std::set<std::string>{"trap"});
    CHECK(perturbation.begins == begins_at_drop);            // never measured again
    CHECK(tracker->measured_iterations() > begins_at_drop);  // the budget went on, time only
    CHECK(tracker->observer_effect(0.05).flagged);
    RunSnapshot s = tracker->Snapshot();
    const Projection* trap = Find(s, "trap:events");
    REQUIRE(trap != nullptr);
    CHECK(trap->perturbed);
    CHECK(!Find(s, "time_ns")->perturbed);
    // A later run on the node starts without the collector that perturbed this one only when the
    // drop is node-wide (runs.observer_effect_node_drop_s > 0).
    const pid_t next = 4343;
    runs.OnProcessFound(ProcessInfo{next, 1, "replay", "drop-test-next"});
    for (size_t r = 0; r < 400; ++r) {
      const uint64_t tokens = static_cast<uint64_t>(t.tokens[r]);
      const uint64_t end = clock + static_cast<uint64_t>(t.metrics[time][r]);
      runs.OnIterationBegin({next, next, t.iter[r], t.seq_len[r], t.batch[r], tokens, clock});
      runs.OnIterationEnd(
          {next, next, t.iter[r], t.seq_len[r], t.batch[r], tokens, clock, end, true});
      clock = end + 1000;
    }
    RunTracker* later = runs.FindActive("drop-test-next");
    REQUIRE(later != nullptr);
    CHECK(later->measured_iterations() > 0);
    if (node_drop_s == 0) {
      CHECK(later->dropped_collectors().empty());
      CHECK(perturbation.begins > begins_at_drop);  // measured again in the new run
      continue;
    }
    CHECK(later->dropped_collectors() == std::set<std::string>{"trap"});
    CHECK(perturbation.begins == begins_at_drop);
    // Past its expiry, new runs try it again.
    fake.Advance(node_drop_s * 1'000'000'000 + 1);
    runs.OnProcessFound(ProcessInfo{next + 2, 1, "replay", "drop-test-expired"});
    RunTracker* expired = runs.FindActive("drop-test-expired");
    REQUIRE(expired != nullptr);
    CHECK(expired->dropped_collectors().empty());
    // A reload tries it again in new runs.
    runs.Reconfigure(o);
    runs.OnProcessFound(ProcessInfo{next + 1, 1, "replay", "drop-test-reloaded"});
    RunTracker* reloaded = runs.FindActive("drop-test-reloaded");
    REQUIRE(reloaded != nullptr);
    CHECK(reloaded->dropped_collectors().empty());
  }
}

TEST_CASE("observer effect: seqpoint show serves it live and rebuilds it for a closed run") {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  ReplaySpec spec;
  spec.exit_at_end = false;  // stays active: the live view first
  DaemonHarness h;
  REQUIRE(h.Start(cfg, ReplayParts(1, spec)).ok());
  json live;
  REQUIRE(WaitFor([&] {
    auto s = h.Show("job-0");
    if (!s.ok() || (*s)["run"]["iterations"] != Recorded().rows()) return false;
    live = *s;
    return true;
  }));
  const json& oe = live["observer_effect"];
  MESSAGE("replayed trace: " << oe["all"].dump());
  CHECK(oe["all"]["pairs"].get<uint64_t>() >= 8);
  CHECK(!oe["flagged"].get<bool>());  // the replayed collector perturbs nothing
  CHECK(oe["groups"].size() == 1);
  CHECK(oe["groups"][0]["group"] == "replay#0");
  CHECK(live["self_checks"].contains("time_ns"));
  CHECK(live["projections"]["time_ns"]["perturbed"] == false);
  CHECK(live["self_check"]["observer_excess"] == 0);
  h.Stop();
  // A restarted daemon closes the run (its replay is over); the stored run gives the same
  // estimate from its controls, groups and histogram.
  spec.traces.clear();
  spec.max_rows = 0;
  DaemonHarness again;
  cfg.run_idle_timeout_s = 1;
  REQUIRE(again.Start(cfg, DaemonParts{}).ok());
  json closed;
  REQUIRE(WaitFor([&] {
    auto s = again.Show("job-0");
    if (!s.ok() || s->value("run", json::object()).value("state", "") == "active") return false;
    closed = *s;
    return true;
  }));
  CHECK(closed["observer_effect"]["all"]["pairs"] == oe["all"]["pairs"]);
  CHECK(closed["observer_effect"]["all"]["ratio"].get<double>() ==
        doctest::Approx(oe["all"]["ratio"].get<double>()).epsilon(1e-3));
  CHECK(closed["self_checks"].contains("time_ns"));
}
