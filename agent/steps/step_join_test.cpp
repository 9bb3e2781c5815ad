// StepJoin: ranks' iterations joined into steps, in order and out of order, with a lagging
// rank, a crashed rank, ranks of different iteration counts, announced ranks never seen, and
// ranks that do not synchronise.
#include "agent/steps/step_join.h"

#include <doctest/doctest.h>

#include <algorithm>

using namespace seqpoint::daemon;
using seqpoint::collectors::Sample;

namespace {

using Kind = StepAction::Kind;

// The test's stand-in for RunManager: answers every kDecide with `collect`, and records what
// the join asked for.
struct Driver {
  StepJoin join;
  bool collect = true;
  std::vector<uint64_t> decided;                     // steps, in the order decided
  std::vector<std::pair<pid_t, uint64_t>> measured;  // kMeasure
  std::vector<JoinedStep> steps;
  std::vector<JoinedStep> decisions;  // the features each kDecide carried

  explicit Driver(uint32_t expected = 0) : join(100, expected) {}
  void Drain() {
    for (auto actions = join.TakeActions(); !actions.empty(); actions = join.TakeActions()) {
      for (StepAction& a : actions) {
        if (a.kind == Kind::kDecide) {
          decided.push_back(a.iter);
          decisions.push_back(a.step);
          join.Decided(a.iter, collect, 2);
        } else if (a.kind == Kind::kMeasure) {
          CHECK(a.group == 2);
          measured.emplace_back(a.pid, a.iter);
        } else {
          steps.push_back(std::move(a.step));
        }
      }
    }
  }
  bool Measuring(pid_t pid, uint64_t iter) const {
    return std::find(measured.begin(), measured.end(), std::make_pair(pid, iter)) != measured.end();
  }
  // Rank pid's iteration: SL sl, 10 tokens per SL, from t0 to t1 (ms).
  void Begin(pid_t pid, uint64_t iter, uint32_t sl, uint64_t t0) {
    join.Begin(pid, iter, sl, 4, 10 * sl, t0 * 1'000'000);
    Drain();
  }
  void End(pid_t pid, uint64_t iter, uint32_t sl, uint64_t t0, uint64_t t1, double clock = 0) {
    const bool m = Measuring(pid, iter);
    std::vector<Sample> v;
    if (m) v = {{"perf:task-clock", clock, "ns"}, {"group:perf", 2, "group"}};
    join.End(pid, iter, sl, 4, 10 * sl, t0 * 1'000'000, t1 * 1'000'000, m, v);
    Drain();
  }
  void Both(uint64_t iter, uint32_t sl_a, uint32_t sl_b, uint64_t t) {
    Begin(1, iter, sl_a, t);
    Begin(2, iter, sl_b, t + 1);
    End(1, iter, sl_a, t, t + 8, 7);
    End(2, iter, sl_b, t + 1, t + 9, 8);
  }
  double Value(const JoinedStep& s, const std::string& name) const {
    for (const Sample& v : s.values) {
      if (v.name == name) return v.value;
    }
    return -1;
  }
};

}  // namespace

TEST_CASE(
    "step join: two ranks in step: one step each, largest SL, tokens summed, counters "
    "summed") {
  Driver d;
  d.join.AddRank(1, 0);
  d.join.AddRank(2, 1);
  d.Begin(1, 0, 12, 100);
  CHECK(d.decided.empty());  // rank 2 has not begun: the decision waits for it
  d.Begin(2, 0, 30, 101);
  REQUIRE(d.decided == std::vector<uint64_t>{0});
  CHECK(d.decisions[0].seq_len == 30);
  CHECK(d.decisions[0].tokens == 420);
  CHECK(d.Measuring(1, 0));
  CHECK(d.Measuring(2, 0));
  d.End(1, 0, 12, 100, 108, 7);
  CHECK(d.steps.empty());
  d.End(2, 0, 30, 101, 112, 9);
  REQUIRE(d.steps.size() == 1);
  const JoinedStep& s = d.steps[0];
  CHECK(s.iter == 0);
  CHECK(s.seq_len == 30);
  CHECK(s.tokens == 420);
  CHECK(s.ranks == 2);
  CHECK(s.begin_ns == 100'000'000);  // the first rank's begin
  CHECK(s.end_ns == 112'000'000);    // the last rank's end
  CHECK(s.whole);
  CHECK(d.Value(s, "perf:task-clock") == 16);  // 7 + 9
  CHECK(d.Value(s, "group:perf") == 2);        // bookkeeping: not summed
  CHECK(d.join.steps() == 1);
  CHECK(d.join.open_steps() == 0);
}

TEST_CASE("step join: events out of order: steps still come whole and in order") {
  Driver d;
  d.join.AddRank(1, 0);
  d.join.AddRank(2, 1);
  d.Begin(2, 0, 8, 100);
  d.Begin(1, 0, 8, 100);
  d.End(2, 0, 8, 100, 105, 3);
  d.Begin(2, 1, 9, 106);  // rank 2 is a step ahead of rank 1's end
  d.End(1, 0, 8, 100, 107, 4);
  REQUIRE(d.steps.size() == 1);
  d.Begin(1, 1, 9, 108);
  d.End(2, 1, 9, 106, 115, 5);
  d.End(1, 1, 9, 108, 116, 6);
  REQUIRE(d.steps.size() == 2);
  CHECK(d.steps[0].iter == 0);
  CHECK(d.steps[1].iter == 1);
  CHECK(d.steps[1].whole);
  CHECK(d.steps[1].begin_ns == 106'000'000);
  CHECK(d.Value(d.steps[1], "perf:task-clock") == 11);
  // A rank that begins after the decision is measured at its own begin.
  Driver late;
  late.join.AddRank(1, 0);
  late.join.AddRank(2, 1);
  late.join.RemoveRank(2, "gone");  // only rank 1 expected: it decides alone...
  late.join.AddRank(3, 2);          // ...until another rank shows up
  late.Begin(1, 0, 8, 100);
  CHECK(late.decided.empty());
  late.Begin(3, 0, 8, 100);
  CHECK(late.Measuring(3, 0));
}

TEST_CASE("step join: a lagging rank is reported and left out, never mixed in") {
  Driver d;
  d.join.AddRank(1, 0);
  d.join.AddRank(2, 1);
  d.Both(0, 10, 10, 0);
  d.Begin(2, 1, 10, 20);  // rank 2 hangs inside iteration 1
  for (uint64_t i = 1; i <= 7; ++i) {
    d.Begin(1, i, 10, 20 * i);
    d.End(1, i, 10, 20 * i, 20 * i + 8, 7);
  }
  CHECK(d.join.ranks().at(2).status == RankStatus::kLagging);
  // Steps 1.. went on without it once it was more than kStepLagSteps behind.
  REQUIRE(d.steps.size() >= 4);
  CHECK(d.steps[1].ranks == 1);
  CHECK(!d.steps[1].whole);  // rank 2's iteration 1 was left out
  const size_t emitted = d.steps.size();
  d.End(2, 1, 10, 20, 500);  // its late end: counted, not mixed into the step emitted
  CHECK(d.join.late_iterations() == 1);
  CHECK(d.steps.size() == emitted);
  // It catches up at the first step still open, and counts again.
  const uint64_t next = d.steps.back().iter + 1;
  d.Begin(2, next, 10, 600);
  CHECK(d.join.ranks().at(2).status == RankStatus::kLive);
  d.End(2, next, 10, 600, 608);
  d.Begin(1, next, 10, 600);
  d.End(1, next, 10, 600, 609);
  CHECK(d.steps.back().iter == next);
  CHECK(d.steps.back().ranks == 2);
}

TEST_CASE("step join: a rank that crashes mid-step: the step goes on with the rest, not whole") {
  Driver d;
  d.join.AddRank(1, 0);
  d.join.AddRank(2, 1);
  d.Both(0, 10, 10, 0);
  d.Begin(1, 1, 10, 20);
  d.Begin(2, 1, 10, 21);
  REQUIRE(d.Measuring(1, 1));
  d.End(1, 1, 10, 20, 28, 7);
  CHECK(d.steps.size() == 1);
  d.join.RemoveRank(2, "killed by signal 9 (SIGKILL) in the middle of an iteration");
  d.Drain();
  REQUIRE(d.steps.size() == 2);
  CHECK(d.steps[1].ranks == 1);
  CHECK(d.steps[1].measure);
  CHECK(!d.steps[1].whole);  // rank 2's share of the counters is gone
  CHECK(d.steps[1].values.empty());
  CHECK(d.join.partial_steps() == 1);
  CHECK(d.join.ranks().at(2).status == RankStatus::kStopped);
  CHECK(d.join.ranks().at(2).stopped.find("SIGKILL") != std::string::npos);
  d.Begin(1, 2, 10, 40);  // the survivor's steps: decided and emitted alone
  d.End(1, 2, 10, 40, 48, 7);
  REQUIRE(d.steps.size() == 3);
  CHECK(d.steps[2].whole);
  CHECK(d.Value(d.steps[2], "perf:task-clock") == 7);
}

// Issue 19: a rank that begins one more iteration far ahead (its exit-mid marker, a global
// step) and dies in it led the join there: the survivor was lagging, the empty step was emitted
// when the dead rank was removed, and every later step of the survivor was dropped as late.
TEST_CASE("step join: a rank that dies in an iteration far ahead: the survivor's steps go on") {
  Driver d;
  d.join.AddRank(1, 0);
  d.join.AddRank(2, 1);
  for (uint64_t i = 0; i < 5; ++i) d.Both(i, 10, 12, 20 * i);
  d.Begin(2, 999'999'999, 16, 200);  // begun, never ended: it dies inside
  d.join.RemoveRank(2, "exited with status 0 in the middle of an iteration");
  d.Drain();
  for (uint64_t i = 5; i < 10; ++i) {
    d.Begin(1, i, 10, 20 * i);
    d.End(1, i, 10, 20 * i, 20 * i + 8, 7);
  }
  size_t survivor_steps = 0;
  for (const JoinedStep& s : d.steps) survivor_steps += s.iter >= 5 && s.iter < 10;
  CHECK(survivor_steps == 5);
  CHECK(d.join.ranks().at(1).late == 0);
}

TEST_CASE("step join: ranks with different iteration counts") {
  Driver d;
  d.join.AddRank(1, 0);
  d.join.AddRank(2, 1);
  for (uint64_t i = 0; i < 6; ++i) d.Both(i, 10, 12, 20 * i);
  d.join.RemoveRank(2, "exited with status 0");
  d.Drain();
  for (uint64_t i = 6; i < 10; ++i) {
    d.Begin(1, i, 10, 20 * i);
    d.End(1, i, 10, 20 * i, 20 * i + 8, 7);
  }
  REQUIRE(d.steps.size() == 10);
  for (uint64_t i = 0; i < 10; ++i) {
    CHECK(d.steps[i].iter == i);
    CHECK(d.steps[i].ranks == (i < 6 ? 2u : 1u));
    CHECK(d.steps[i].seq_len == (i < 6 ? 12u : 10u));
  }
  CHECK(d.join.partial_steps() == 0);
  CHECK(d.join.late_iterations() == 0);
}

TEST_CASE(
    "step join: ranks the launcher announced but never showed hold steps only up to the "
    "lag bound") {
  Driver d(/*expected=*/2);
  d.join.AddRank(1, 0);
  CHECK(d.join.unseen_ranks() == 1);
  for (uint64_t i = 0; i < 3; ++i) {
    d.Begin(1, i, 10, 20 * i);
    d.End(1, i, 10, 20 * i, 20 * i + 8, 7);
  }
  CHECK(d.steps.empty());  // rank 1 of 2 may yet appear
  for (uint64_t i = 3; i < 8; ++i) {
    d.Begin(1, i, 10, 20 * i);
    d.End(1, i, 10, 20 * i, 20 * i + 8, 7);
  }
  CHECK(d.steps.size() == 8);
  CHECK(d.join.open_steps() == 0);
}

TEST_CASE(
    "step join: ranks that do not synchronise: a step ended before all began is "
    "undecided, never measured in part") {
  Driver d;
  d.join.AddRank(1, 0);
  d.join.AddRank(2, 1);
  d.Begin(1, 0, 10, 1);
  d.End(1, 0, 10, 1, 5, 3);  // rank 2 has not begun 0
  d.Begin(2, 0, 14, 7);
  CHECK(d.decided.empty());
  CHECK(d.measured.empty());
  d.End(2, 0, 14, 7, 12, 4);
  REQUIRE(d.steps.size() == 1);
  CHECK(!d.steps[0].measure);
  CHECK(d.steps[0].values.empty());
  CHECK(d.steps[0].seq_len == 14);
  CHECK(d.steps[0].begin_ns == 1'000'000);
  CHECK(d.steps[0].end_ns == 12'000'000);
}

TEST_CASE("step join: a process that ran alone before the run became data-parallel") {
  StepJoin join(1, 0);
  join.AddRank(1, -1, /*first_iter=*/5);  // iterations 0..4 were fed to the run directly
  join.AddRank(2, -1);
  CHECK(join.Direct(1, 4));
  CHECK(!join.Direct(1, 5));
  CHECK(!join.Direct(2, 0));
}

TEST_CASE("step join: a rank found after the others began lags only if it then falls behind") {
  Driver d;
  d.join.AddRank(1, 0);
  for (uint64_t i = 0; i < 6; ++i) {
    d.Begin(1, i, 10, 20 * i);
    d.End(1, i, 10, 20 * i, 20 * i + 8, 7);
  }
  d.join.AddRank(2, 1);  // the probes reached rank 1 late: its first events are of step 6
  d.Drain();
  d.Begin(1, 6, 10, 120);
  CHECK(d.join.ranks().at(2).status == RankStatus::kLive);
  d.Begin(2, 6, 12, 121);
  d.End(1, 6, 10, 120, 128, 7);
  d.End(2, 6, 12, 121, 129, 8);
  REQUIRE(d.steps.size() == 7);
  CHECK(d.steps[6].ranks == 2);
  CHECK(d.steps[6].whole);
  CHECK(d.Value(d.steps[6], "perf:task-clock") == 15);
}

TEST_CASE(
    "step join: a device's samples are taken once per step, a process's summed, groups once "
    "per collector") {
  using seqpoint::collectors::DeviceSample;
  using seqpoint::collectors::SampleKind;
  StepJoin join(100, 0);
  join.AddRank(1, 0);
  join.AddRank(2, 1);
  std::vector<JoinedStep> steps;
  auto drain = [&] {
    for (auto a = join.TakeActions(); !a.empty(); a = join.TakeActions()) {
      for (StepAction& x : a) {
        if (x.kind == Kind::kDecide) join.Decided(x.iter, true, 0);
        if (x.kind == Kind::kStep) steps.push_back(std::move(x.step));
      }
    }
  };
  join.Begin(1, 0, 10, 4, 40, 1'000);
  join.Begin(2, 0, 10, 4, 40, 1'100);
  drain();
  // Each rank's NVML collector read both GPUs of the node (and the node's energy): the same
  // devices, read twice. Rank 2 read GPU 0 a little later: its window differs slightly.
  auto rank_values = [&](double clock, double gpu0_uj) {
    return std::vector<Sample>{
        {"perf:task-clock", clock, "ns"},
        DeviceSample("nvml:gpu0:energy", gpu0_uj, "uJ", SampleKind::kDelta, "GPU-aaaa"),
        DeviceSample("nvml:gpu1:energy", 500, "uJ", SampleKind::kDelta, "GPU-bbbb"),
        DeviceSample("nvml:gpu0:power", 250, "W", SampleKind::kGauge, "GPU-aaaa"),
        DeviceSample("energy_uj", 2'000, "uJ", SampleKind::kDelta, "node")};
  };
  join.End(1, 0, 10, 4, 40, 1'000, 9'000, true, rank_values(7, 1'000), {{"perf", 1}, {"nvml", 0}});
  join.End(2, 0, 10, 4, 40, 1'100, 9'100, true, rank_values(9, 1'010), {{"perf", 1}, {"nvml", 0}});
  drain();
  REQUIRE(steps.size() == 1);
  const JoinedStep& s = steps[0];
  REQUIRE(s.whole);
  auto value = [&](const std::string& name) {
    double v = -1;
    int n = 0;
    for (const Sample& x : s.values) {
      if (x.name == name) v = x.value, ++n;
    }
    CHECK(n == 1);  // one row per metric
    return v;
  };
  CHECK(value("perf:task-clock") == 16);      // process: 7 + 9
  CHECK(value("nvml:gpu0:energy") == 1'000);  // device: once (rank 1's), not 2,010
  CHECK(value("nvml:gpu1:energy") == 500);
  CHECK(value("nvml:gpu0:power") == 250);  // a gauge, once
  CHECK(value("energy_uj") == 2'000);      // the node's, once
  REQUIRE(s.groups.size() == 2);
  CHECK(s.groups[0] == CounterGroup{"perf", 1});
  CHECK(s.groups[1] == CounterGroup{"nvml", 0});
}

TEST_CASE("step join: a rank that reports no energy: the node's energy comes from the others") {
  using seqpoint::collectors::DeviceSample;
  using seqpoint::collectors::SampleKind;
  StepJoin join(100, 0);
  join.AddRank(1, 0);
  join.AddRank(2, 1);
  std::vector<JoinedStep> steps;
  auto drain = [&] {
    for (auto a = join.TakeActions(); !a.empty(); a = join.TakeActions()) {
      for (StepAction& x : a) {
        if (x.kind == Kind::kDecide) join.Decided(x.iter, true, 0);
        if (x.kind == Kind::kStep) steps.push_back(std::move(x.step));
      }
    }
  };
  join.Begin(1, 0, 10, 4, 40, 1'000);
  join.Begin(2, 0, 10, 4, 40, 1'100);
  drain();
  // Rank 2's energy collector failed this time (no energy_uj): the node's energy is one
  // device's reading, so rank 1's stands for the step; nothing is halved or summed.
  join.End(1, 0, 10, 4, 40, 1'000, 9'000, true,
           {{"perf:task-clock", 7, "ns"},
            DeviceSample("energy_uj", 2'000, "uJ", SampleKind::kDelta, "node")});
  join.End(2, 0, 10, 4, 40, 1'100, 9'100, true, {{"perf:task-clock", 9, "ns"}});
  drain();
  REQUIRE(steps.size() == 1);
  REQUIRE(steps[0].whole);
  double energy = -1, clock = -1;
  for (const Sample& v : steps[0].values) {
    if (v.name == "energy_uj") energy = v.value;
    if (v.name == "perf:task-clock") clock = v.value;
  }
  CHECK(energy == 2'000);
  CHECK(clock == 16);
}

TEST_CASE("step join: a process counter one rank did not read is left out, not summed short") {
  // Rank 2's window was flagged at the probes: its task-clock is left out of its values. The
  // step's task-clock would be rank 1's alone (about half the step's CPU time): left out.
  Driver d;
  d.join.AddRank(1, 0);
  d.join.AddRank(2, 1);
  d.Begin(1, 0, 10, 100);
  d.Begin(2, 0, 10, 101);
  REQUIRE(d.Measuring(2, 0));
  d.End(1, 0, 10, 100, 108, 7);
  d.join.End(2, 0, 10, 4, 100, 101'000'000, 109'000'000, /*measured=*/true,
             {{"perf:page-faults", 3, "count"}, {"group:perf", 2, "group"}});
  d.Drain();
  REQUIRE(d.steps.size() == 1);
  CHECK(d.steps[0].whole);
  CHECK(d.Value(d.steps[0], "perf:task-clock") == -1);  // left out
  CHECK(d.Value(d.steps[0], "group:perf") == 2);        // bookkeeping stays
  CHECK(d.join.counters_left_out() == 1);
  CHECK(d.join.last_left_out().find("perf:task-clock") != std::string::npos);
  CHECK(d.join.last_left_out().find("read by 1 of 2 ranks") != std::string::npos);
  // page-faults read by rank 2 only: left out as well.
  CHECK(d.Value(d.steps[0], "perf:page-faults") == -1);
  // The next step, read by both: summed as before.
  d.Both(1, 10, 10, 120);
  REQUIRE(d.steps.size() == 2);
  CHECK(d.Value(d.steps[1], "perf:task-clock") == 15);
  CHECK(d.join.counters_left_out() == 1);
}
