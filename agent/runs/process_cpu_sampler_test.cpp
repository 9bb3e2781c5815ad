// The process CPU sampler (process_cpu_sampler.h): interpolation between periodic reads of a
// process's CPU clock, exact sums over contiguous iterations, nothing guessed outside the
// samples; the real clock of this process; and the run tracker given those CPU times.
#include "agent/runs/process_cpu_sampler.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/runs/run_tracker.h"
#include "selector/estimate/recorded_live_runs.h"

namespace seqpoint::daemon {

TEST_CASE("process cpu sampler: interpolates between reads, sums telescope, no guesses") {
  uint64_t now = 1'000'000;  // the fake clock: each read of it moves it by 1 ns
  uint64_t cpu = 0;
  bool alive = true;
  ProcessCpuSampler s([&] { return now++; },
                      [&](pid_t) -> std::optional<uint64_t> {
                        if (!alive) return std::nullopt;
                        return cpu;
                      });
  s.Watch(42);  // a sample at ~1'000'000, CPU 0
  CHECK(s.Watching(42));
  // 2 CPUs busy for 10 ms, then idle for 10 ms, then busy on one CPU for 10 ms.
  for (uint64_t rate : {2, 0, 1}) {
    now += 10'000'000;
    cpu += rate * 10'000'000;
    s.Sample();
  }
  CHECK(s.Covers(42, 31'000'000));
  CHECK(!s.Covers(42, 32'000'000));
  // Inside the first interval: twice the time.
  auto a = s.CpuBetween(42, 3'000'000, 5'000'000);
  REQUIRE(a);
  CHECK(*a == doctest::Approx(4'000'000).epsilon(1e-3));
  // Contiguous iterations over the whole sampled span add up to the clock's difference.
  const std::vector<uint64_t> cuts = {1'000'001,  4'000'000,  12'345'678,
                                      20'000'000, 27'000'000, 31'000'002};
  double sum = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    auto c = s.CpuBetween(42, cuts[i], cuts[i + 1]);
    REQUIRE(c);
    sum += *c;
  }
  CHECK(sum == doctest::Approx(30'000'000).epsilon(1e-6));
  // Outside the samples: nothing, counted.
  const uint64_t uncovered = s.stats().uncovered;
  CHECK(!s.CpuBetween(42, 500'000, 2'000'000));
  CHECK(!s.CpuBetween(42, 30'000'000, 40'000'000));
  CHECK(!s.CpuBetween(7, 2'000'000, 3'000'000));  // not watched
  CHECK(s.stats().uncovered == uncovered + 3);
  // A clock that goes back is not a sample.
  cpu -= 5;
  now += 10'000'000;
  s.Sample();
  CHECK(s.stats().implausible == 1);
  CHECK(!s.Covers(42, 40'000'000));
  // The process exits: its clock fails, it is ended, no further samples.
  alive = false;
  CHECK(!s.Ended(42));
  s.Sample();
  CHECK(s.Ended(42));
  CHECK(s.stats().failures == 1);
  s.Forget(42);
  CHECK(!s.Watching(42));
}

TEST_CASE("process cpu sampler: this process's clock counts every thread") {
  const std::optional<uint64_t> before = ReadProcessCpuNs(getpid());
  REQUIRE(before);
  // Two threads spinning on their own CPU clocks for 20 ms each: at least 40 ms of CPU, however
  // loaded the machine (each spins until it has had 20 ms of CPU).
  auto spin = [] {
    timespec t0{}, t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do {
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1'000'000'000L + (t.tv_nsec - t0.tv_nsec) < 20'000'000L);
  };
  std::thread a(spin), b(spin);
  a.join();
  b.join();
  const std::optional<uint64_t> after = ReadProcessCpuNs(getpid());
  REQUIRE(after);
  CHECK(*after - *before >= 40'000'000u);
  CHECK(!ReadProcessCpuNs(-1));  // not a process: nullopt, not this one's clock
  CHECK(!ReadProcessCpuNs(0));
  CHECK(!ReadProcessCpuNs(4'194'305));  // above PID_MAX_LIMIT: no such process
}

}  // namespace seqpoint::daemon

// The run tracker with process CPU times (RunTracker::AwaitCpu / SettleCpu): the recorded
// libtorch run, its second half on a loaded node where each unmeasured iteration waits as long as
// it works; a measured iteration's task-clock is its CPU time. Given every iteration's CPU time,
// the task-clock projection goes through it and holds; without, through time, it bills the waits.

namespace seqpoint::daemon {
namespace {

const Projection* FindProjection(const RunSnapshot& s, const std::string& metric) {
  for (const Projection& p : s.projections) {
    if (p.metric == metric) return &p;
  }
  return nullptr;
}

struct Replayed {
  std::unique_ptr<RunTracker> tracker;
  double cpu_total = 0;
  uint64_t measured_rows = 0;  // process_cpu_ns rows for the store
};

Replayed ReplayLoaded(bool with_cpu) {
  RunRecord rec;
  rec.id = 1;
  rec.key = "k";
  selector::OnlineOptions o;
  o.per_doubling = 16;
  auto t = RunTracker::Create(rec, o);
  REQUIRE(t.ok());
  Replayed out{std::move(*t)};
  const auto& r = selector::testing::Libtorch2();
  const size_t n = r.seq_len.size();
  uint64_t clock = 1'000'000;
  std::vector<std::pair<uint64_t, double>> later;  // settled out of order, after the run
  for (uint64_t i = 0; i < n; ++i) {
    auto d = out.tracker->Decide(42, i, r.seq_len[i], 0, 0);
    const double cpu = 1e3 * r.cpu_us[i];
    std::vector<collectors::Sample> values;
    if (d.measure) values.push_back({"perf:task-clock", cpu, "ns"});
    const double wait = i >= n / 2 && !d.measure ? cpu : 0;
    const auto dt = static_cast<uint64_t>(1e3 * r.time_us[i] + wait);
    out.tracker->Complete(42, i, r.seq_len[i], 0, 0, clock, clock + dt, values);
    clock += dt + 1000;
    out.cpu_total += cpu;
    if (!with_cpu) continue;
    REQUIRE(out.tracker->AwaitCpu(42, i));
    CHECK(!out.tracker->AwaitCpu(42, i));  // once
    if (i % 7 == 0) {
      later.push_back({i, cpu});
    } else {
      out.tracker->SettleCpu(42, i, cpu);
    }
  }
  for (auto it = later.rbegin(); it != later.rend(); ++it) {
    out.tracker->SettleCpu(42, it->first, it->second);
  }
  out.tracker->SettleCpu(42, 999'999, 1.0);  // never waited: ignored
  for (const Measurement& m : out.tracker->TakeNewMeasurements()) {
    out.measured_rows += m.metric == "process_cpu_ns";
  }
  return out;
}

}  // namespace

TEST_CASE("process cpu: the run tracker projects task-clock through every iteration's CPU time") {
  Replayed with = ReplayLoaded(true);
  CHECK(with.tracker->cpu_waiting() == 0);
  CHECK(with.tracker->cpu_iterations() == selector::testing::Libtorch2().seq_len.size());
  CHECK(with.tracker->actual_cpu_ns() == doctest::Approx(with.cpu_total));
  CHECK(with.measured_rows == with.tracker->measured_iterations());
  const RunSnapshot s = with.tracker->Snapshot();
  const Projection* tc = FindProjection(s, "perf:task-clock");
  REQUIRE(tc != nullptr);
  const double err = (tc->total - with.cpu_total) / with.cpu_total;
  MESSAGE("task-clock through CPU time: " << 100 * err << "%");
  CHECK(std::fabs(err) < 0.03);
  const Projection* pc = FindProjection(s, "process_cpu_ns");
  REQUIRE(pc != nullptr);
  CHECK(pc->actual == doctest::Approx(with.cpu_total));

  Replayed without = ReplayLoaded(false);
  const RunSnapshot w = without.tracker->Snapshot();
  const Projection* tt = FindProjection(w, "perf:task-clock");
  REQUIRE(tt != nullptr);
  const double lean = (tt->total - without.cpu_total) / without.cpu_total;
  MESSAGE("task-clock through time: " << 100 * lean << "%");
  CHECK(lean > 0.15);
  CHECK(FindProjection(w, "process_cpu_ns") == nullptr);
}

}  // namespace seqpoint::daemon
