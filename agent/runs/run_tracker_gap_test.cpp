// Unobserved iterations: only gaps between observed iterations count, plus, for a process that
// ran before the probes attached, the iterations its start time leaves room for. A job resumed
// from a checkpoint that numbers its iterations from its global step (iter = 50,000 + i) is
// not 50,000 missed iterations. And after a restart, untimed iterations stay untimed.
#include <doctest/doctest.h>

#include "agent/runs/run_tracker.h"

using namespace seqpoint::daemon;

namespace {

seqpoint::selector::OnlineOptions TrackerOptions() {
  seqpoint::selector::OnlineOptions o;
  o.budget_count = 16;
  return o;
}

std::unique_ptr<RunTracker> NewTracker() {
  RunRecord rec;
  rec.id = 1;
  rec.key = "k";
  auto t = RunTracker::Create(rec, TrackerOptions());
  REQUIRE(t.ok());
  return std::move(*t);
}

constexpr uint64_t kMs = 1'000'000;

// n iterations of 10 ms from index `first`, the first beginning at `t0` (ns).
void Run(RunTracker& t, pid_t pid, uint64_t first, uint64_t n, uint64_t t0) {
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t b = t0 + i * 11 * kMs;
    (void)t.Decide(pid, first + i, 32, 1, 32);
    t.Complete(pid, first + i, 32, 1, 32, b, b + 10 * kMs, {});
  }
}

}  // namespace

TEST_CASE("agent run tracker gap: a process numbered from its global step misses nothing") {
  auto t = NewTracker();
  // Started 2 s before its first iteration (imports, loading the checkpoint): 50,000 iterations
  // of 10 ms cannot fit in 2 s.
  t->SetProcessStart(42, 1'000 * kMs);
  Run(*t, 42, 50'000, 600, 3'000 * kMs);
  CHECK(t->record().iterations == 600);
  CHECK(t->record().unobserved == 0);
  CHECK(t->record().unobserved_before_attach == 0);
  CHECK(t->record().max_iter == 50'599);
}

TEST_CASE("agent run tracker gap: gaps between observed iterations still count") {
  auto t = NewTracker();
  t->SetProcessStart(42, 1'000 * kMs);
  Run(*t, 42, 50'000, 100, 3'000 * kMs);
  Run(*t, 42, 50'150, 100, 6'000 * kMs);  // 50 lost between (agent down, lost events)
  CHECK(t->record().unobserved == 50);
  CHECK(t->record().unobserved_before_attach == 0);
}

TEST_CASE("agent run tracker gap: a process that ran before the probes attached") {
  auto t = NewTracker();
  // Running for 100 s when the probes attached at its iteration 3,000: 3,000 x 10 ms fit.
  t->SetProcessStart(42, 1'000 * kMs);
  Run(*t, 42, 3'000, 200, 101'000 * kMs);
  CHECK(t->record().unobserved == 3'000);
  CHECK(t->record().unobserved_before_attach == 3'000);
  // A second rank started at exec, numbered from its global step: nothing before attach.
  t->SetProcessStart(43, 200'000 * kMs);
  Run(*t, 43, 9'000, 10, 201'000 * kMs);
  CHECK(t->record().unobserved == 3'000);
}

TEST_CASE("agent run tracker gap: without a start time (a replayed trace) the index counts") {
  auto t = NewTracker();
  Run(*t, 42, 700, 50, 1'000 * kMs);
  CHECK(t->record().unobserved == 700);
  CHECK(t->record().unobserved_before_attach == 0);
}

TEST_CASE("agent run tracker gap: after a restart, untimed iterations stay untimed") {
  auto t = NewTracker();
  // 40 timed iterations, 60 whose begin was never seen (no time).
  Run(*t, 42, 0, 40, 1'000 * kMs);
  for (uint64_t i = 40; i < 100; ++i) {
    (void)t->Decide(42, i, 32, 1, 32);
    t->Complete(42, i, 32, 1, 32, 0, 5'000 * kMs + i * kMs, {});
  }
  RunSnapshot snap = t->Snapshot();
  REQUIRE(snap.histogram.size() == 1);
  CHECK(snap.histogram[0].count == 100);
  CHECK(snap.histogram[0].time_count == 40);
  CHECK(t->timed_iterations() == 40);
  const SelfCheck before = t->self_check();
  auto restored =
      RunTracker::Restore(snap, t->TakeNewMeasurements(), t->TakeNewLog(), TrackerOptions());
  REQUIRE(restored.ok());
  CHECK((*restored)->timed_iterations() == 40);  // was 100: every iteration of the bin
  const SelfCheck after = (*restored)->self_check();
  CHECK(after.valid == before.valid);
  CHECK(after.actual == doctest::Approx(before.actual));
  // A bin stored by an older seqpointd (no count of timed iterations): all of it, as before.
  snap.histogram[0].time_count = 0;
  auto old = RunTracker::Restore(snap, {}, {}, TrackerOptions());
  REQUIRE(old.ok());
  CHECK((*old)->timed_iterations() == 100);
}
