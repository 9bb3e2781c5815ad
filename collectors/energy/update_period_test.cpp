// The update period of a stepwise counter (update_period.h) on reads recorded on a real H100 80GB
// HBM3 (driver 580.159.04, bench/gpu/nvml_record.py: collectors/nvml/testdata/
// h100_energy_reads.csv, NVML's total energy read back to back, idle and under load), as
// recorded and with late reads made from it: a read delayed (reads dropped after it, as when the
// thread is preempted between reads) or stretched (one read spanning several, as when it is
// preempted inside the call).
#include "collectors/energy/update_period.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace seqpoint::collectors {
namespace {

constexpr int64_t kMs = 1'000'000;

std::vector<CounterRead> Recorded(const std::string& phase) {
  std::ifstream in(std::string(SEQPOINT_NVML_TESTDATA) + "/h100_energy_reads.csv");
  REQUIRE(in.good());
  std::vector<CounterRead> out;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string ph, t0, t1, mj;
    std::getline(ss, ph, ',');
    std::getline(ss, t0, ',');
    std::getline(ss, t1, ',');
    std::getline(ss, mj, ',');
    if (ph == phase) out.push_back({std::stoll(t0), std::stoll(t1), std::stod(mj)});
  }
  return out;
}

// The probe over reads[start...] until done or the reads run out.
UpdatePeriod Probe(const std::vector<CounterRead>& reads, size_t start = 0) {
  UpdatePeriodProbe p;
  for (size_t i = start; i < reads.size() && !p.done() && !p.capped(); ++i) p.Add(reads[i]);
  return p.Estimate();
}

// The mean gap between all changes seen over the first `changes` changes, each placed at the
// middle of its two reads' instants: what both old measurements did (the NVML collector with 3
// changes, the energy reader with 5). The baseline for the late reads.
std::optional<int64_t> MeanOfAllGaps(const std::vector<CounterRead>& reads, int changes) {
  int seen = 0;
  int64_t first = 0, last = 0;
  for (size_t i = 1; i < reads.size() && seen < changes; ++i) {
    if (reads[i].value == reads[i - 1].value) continue;
    const int64_t at = (reads[i - 1].t0_ns + reads[i].t1_ns) / 2;
    if (seen++ == 0) first = at;
    last = at;
  }
  if (seen < 2) return std::nullopt;
  return (last - first) / (seen - 1);
}

// Late reads made from a recording: about once per `every_ns` of its time, a preemption of
// 5-250 ms, either between reads (the reads it would have made are dropped) or inside one (that
// read spans the ones it covers, its value any of theirs: the counter's at some instant inside).
std::vector<CounterRead> Preempted(const std::vector<CounterRead>& reads, uint32_t seed,
                                   int64_t every_ns) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> length(5 * kMs, 250 * kMs);
  std::uniform_int_distribution<int64_t> when(0, 2 * every_ns);
  std::vector<CounterRead> out;
  int64_t next = reads.front().t0_ns + when(rng);
  for (size_t i = 0; i < reads.size(); ++i) {
    if (reads[i].t0_ns < next) {
      out.push_back(reads[i]);
      continue;
    }
    const int64_t until = reads[i].t0_ns + length(rng);
    size_t j = i;
    while (j + 1 < reads.size() && reads[j + 1].t0_ns < until) ++j;
    if (rng() % 2 == 0) {  // inside the call: one read from reads[i].t0 to reads[j].t1
      CounterRead r = reads[i];
      r.t1_ns = reads[j].t1_ns;
      r.value = reads[i + rng() % (j - i + 1)].value;
      out.push_back(r);
    } else if (j + 1 < reads.size()) {  // between reads: the next read comes late
      out.push_back(reads[j + 1]);
      ++j;
    }
    i = j;
    next = reads[i].t1_ns + when(rng);
  }
  return out;
}

}  // namespace

TEST_CASE("update period: the H100's 100 ms from its recorded back-to-back reads") {
  for (const std::string phase : {"idle", "load"}) {
    INFO(phase);
    const std::vector<CounterRead> reads = Recorded(phase);
    REQUIRE(reads.size() > 200);
    // Every start point: the measurement may begin at any phase of a step.
    int64_t lo = INT64_MAX, hi = 0;
    double naive_worst = 0;  // the NVML collector's old measurement: the mean of 2 gaps
    int probes = 0;
    for (size_t start = 0; start + 150 < reads.size(); start += 7) {
      const UpdatePeriod p = Probe(reads, start);
      if (p.gaps < UpdatePeriodProbe::kGaps) break;  // the recording ran out
      REQUIRE(p.period_ns);
      CHECK_FALSE(p.upper_bound);
      lo = std::min(lo, *p.period_ns);
      hi = std::max(hi, *p.period_ns);
      if (const auto naive = MeanOfAllGaps({reads.begin() + start, reads.end()}, 3)) {
        naive_worst = std::max(naive_worst, std::abs(static_cast<double>(*naive) / 1e8 - 1));
      }
      ++probes;
    }
    // Gaps between on-time reads: 97-103 ms idle, 88-113 ms under load (reads of up to 64 ms).
    CHECK(probes > 10);
    CHECK(lo >= (phase == "idle" ? 97 : 90) * kMs);
    CHECK(hi <= (phase == "idle" ? 103 : 110) * kMs);
    MESSAGE(phase << ": " << probes << " measurements, " << lo / 1e6 << " ... " << hi / 1e6
                  << " ms (the mean of all gaps, over 2: up to " << naive_worst * 100
                  << "% off 100 ms)");
  }
}

TEST_CASE("update period: late reads leave it where on-time reads put it") {
  const std::vector<CounterRead> reads = Recorded("idle");
  int measured = 0, runs = 0;
  double worst = 0, naive_worst = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    // A preemption about every 150 ms of reading: most changes have a late read beside them.
    const std::vector<CounterRead> late = Preempted(reads, seed, 150 * kMs);
    REQUIRE(late.size() < reads.size());
    ++runs;
    const UpdatePeriod p = Probe(late);
    if (const auto naive = MeanOfAllGaps(late, 5)) {
      naive_worst = std::max(naive_worst, std::abs(static_cast<double>(*naive) / 1e8 - 1));
    }
    if (!p.period_ns) continue;  // every change beside a late read: unknown, said why
    CAPTURE(seed);
    CAPTURE(p.Describe());
    CHECK_FALSE(p.upper_bound);
    CHECK(*p.period_ns >= 97 * kMs);  // as the on-time reads of the recording measured it
    CHECK(*p.period_ns <= 103 * kMs);
    worst = std::max(worst, std::abs(static_cast<double>(*p.period_ns) / 1e8 - 1));
    ++measured;
  }
  CHECK(measured >= runs * 3 / 4);
  MESSAGE("late reads: " << measured << " of " << runs << " measured, worst " << worst * 100
                         << "% off 100 ms (the mean of all gaps: " << naive_worst * 100 << "%)");
}

TEST_CASE("update period: a 1 ms counter read under preemption (the energy e2e's hogs)") {
  // The counter the e2e's firmware double advances every 1 ms; reads of 20 us, back to back,
  // preempted for 1-100 ms about every 20 ms.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> preempt(1 * kMs, 100 * kMs);
  for (int trial = 0; trial < 20; ++trial) {
    UpdatePeriodProbe p;
    int64_t t = 1'000'000'000 + trial * 137'000;
    while (!p.done() && !p.capped()) {
      if (rng() % 1000 == 0) t += preempt(rng);
      const int64_t t1 = t + 20'000 + (rng() % 50 == 0 ? preempt(rng) : 0);
      p.Add({t, t1, static_cast<double>((t + (t1 - t) / 2) / kMs)});
      t = t1 + 1'000;
    }
    const UpdatePeriod e = p.Estimate();
    REQUIRE(e.period_ns);
    CHECK(*e.period_ns >= kMs * 9 / 10);
    CHECK(*e.period_ns <= kMs * 11 / 10);
  }
}

TEST_CASE("update period: reads slower than the counter give an upper bound, flagged") {
  // Every 50th recorded read (~150 ms apart): each one sees a change.
  const std::vector<CounterRead> reads = Recorded("idle");
  std::vector<CounterRead> slow;
  for (size_t i = 0; i < reads.size(); i += 50) slow.push_back(reads[i]);
  const UpdatePeriod p = Probe(slow);
  REQUIRE(p.period_ns);
  CHECK(p.upper_bound);
  CHECK(*p.period_ns >= 97 * kMs);  // at most this: never under the true period
  CHECK(p.Describe().find(" or less (reads slower than the counter") != std::string::npos);
  // The A100 double's counter, +1 step on every read, read at 3 ms a read: kRunChanges changes
  // in a row end the reading (~50 ms, not the 2 s cap), the bound about one read.
  UpdatePeriodProbe every;
  int n = 0;
  for (int64_t t = 0; !every.done() && !every.capped(); t += 3'100'000) {
    every.Add({t, t + 3 * kMs, static_cast<double>(n++)});
  }
  CHECK(n == 1 + UpdatePeriodProbe::kRunChanges);
  const UpdatePeriod e = every.Estimate();
  REQUIRE(e.period_ns);
  CHECK(e.upper_bound);
  CHECK(*e.period_ns >= 3 * kMs);
  CHECK(*e.period_ns <= 3'600'000);
  // A frozen test clock and a counter that moves on every read: a period of 0, not a bound.
  UpdatePeriodProbe frozen;
  for (int i = 0; i < 10; ++i) frozen.Add({5, 5, static_cast<double>(i)});
  CHECK(frozen.done());
  CHECK(frozen.Estimate().period_ns == 0);
}

TEST_CASE("update period: every change between late reads: unknown, but bounded by the changes") {
  // What the energy e2e's reader met on a loaded 2-core VM (the firmware double's 1.3 ms
  // counter, reads of 50 us): the counter moved between two reads only where the reader was
  // preempted (10-250 ms), never between two on-time reads, so no gap is tight and no two
  // changes are in a row.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> preempt(10 * kMs, 250 * kMs);
  UpdatePeriodProbe p;
  const int64_t period = 1'300'000;
  int64_t t = 1'000'000'000;
  const int pairs = 20;
  for (int k = 0; k < pairs; ++k) {  // two on-time reads (the counter still), then preempted
    const double value = static_cast<double>(t / period);
    p.Add({t, t + 50'000, value});
    p.Add({t + 60'000, t + 110'000, value});
    t += 110'000 + preempt(rng);
  }
  const UpdatePeriod e = p.Estimate();
  CHECK_FALSE(e.period_ns);
  CHECK(e.gaps == 0);
  CHECK(e.changes == pairs - 1);
  CHECK(e.why_not.find("were all between late reads") != std::string::npos);
  // n changes are n distinct updates inside the span of their brackets: at most span / (n - 1),
  // never under the true period, however loose.
  REQUIRE(e.changes_bound_ns);
  CHECK(*e.changes_bound_ns >= period);
  CHECK(*e.changes_bound_ns <= 250 * kMs * 19 / 18 + kMs);  // 19 stretches over 18
  MESSAGE("changes bound " << *e.changes_bound_ns / 1e6 << " ms for a " << period / 1e6
                           << " ms counter (" << e.changes << " changes)");
  // Fewer than two changes bound nothing.
  UpdatePeriodProbe one;
  one.Add({0, 10, 1});
  one.Add({20, 30, 2});
  CHECK_FALSE(one.Estimate().changes_bound_ns);
}

TEST_CASE("update period: a failed read leaves it unknown with its reason, and the caps hold") {
  int calls = 0;
  const UpdatePeriod p = MeasureUpdatePeriod([&]() -> Result<CounterRead> {
    if (++calls > 2) return Unsupported("nvmlDeviceGetTotalEnergyConsumption: Not Supported");
    return CounterRead{0, 0, 5};
  });
  CHECK_FALSE(p.period_ns);
  CHECK(p.reads == 3);
  CHECK(p.read_error.code() == ErrorCode::kUnsupported);
  CHECK(p.why_not.find("could not be measured: nvmlDeviceGetTotalEnergyConsumption: Not "
                       "Supported") != std::string::npos);
  // A counter that never moves: the measurement gives up at its read cap, never loops forever.
  const UpdatePeriod still = MeasureUpdatePeriod([] {
    return Result<CounterRead>(CounterRead{0, 0, 7});
  });
  CHECK_FALSE(still.period_ns);
  CHECK(still.reads == UpdatePeriodProbe::kMaxReads);
  CHECK(still.why_not.find("changed 0 time(s) in 2000 reads") != std::string::npos);
  // Asked to stop (its owner shuts down): at once.
  MeasureOptions stop;
  stop.stop = [] { return true; };
  CHECK(MeasureUpdatePeriod([] { return Result<CounterRead>(CounterRead{}); }, stop).reads == 0);
}

}  // namespace seqpoint::collectors
