// Recorded straggler events replayed (straggler_events.h) on real data: two short runs of
// bench/fleet/ddp_straggler_job.py (2 ranks, gloo DDP on this machine's CPU), each rank's own
// trace kept in tests/golden/:
//   straggler_slow/  --ranks 2 --steps 160 --batching bucketed --slow-rank 1 --slow-factor 1.5
//                    --slow-from 100  (rank 1 is 1.5x as slow from step 100 on, at equal SL; the
//                    sequential test warms up over its first 64 steps)
//   straggler_long/  --ranks 2 --steps 24 --long-rank 1 --long-factor 2  (rank 1 is fed sequences
//                    twice as long: data, not hardware)
// The traces read as the probes' events, the event file's round trip, the replayed verdicts
// against their golden (verdicts.txt: a change in the verdicts is a reviewed change; to accept
// one, SEQPOINT_UPDATE_GOLDEN=1 build/agent/fleet/agent_fleet_straggler_events_test, then review
// the diff), the verdicts' independence of when the steps are settled, and the book's counts.
#include "agent/fleet/straggler_events.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/testing/scratch_dir.h"

using namespace seqpoint;
using namespace seqpoint::daemon::fleet;

namespace {

std::string Golden(const std::string& run) {
  return seqpoint::testing::SourceDir() + "/tests/golden/straggler_" + run;
}

std::vector<RecordedEvent> Load(const std::string& run) {
  auto events = ReadJobTraces({Golden(run) + "/rank0.csv", Golden(run) + "/rank1.csv"});
  REQUIRE_MESSAGE(events.ok(), events.status().ToString());
  return *events;
}

bool Same(const RecordedEvent& x, const RecordedEvent& y) {
  return x.kind == y.kind && x.pid == y.pid && x.rank == y.rank && x.iter == y.iter &&
         x.tokens == y.tokens && x.a == y.a && x.b == y.b;
}

std::string Format(const StepVerdict& v) {
  char line[160];
  std::snprintf(line, sizeof line, "%llu %d %llu %.4f %.4f %d %s",
                static_cast<unsigned long long>(v.iter), v.last_rank,
                static_cast<unsigned long long>(v.lag_ns), v.lag_share, v.token_excess,
                v.straggles ? 1 : 0, CauseName(v.cause));
  std::string out = line;
  for (int32_t r : v.slow_raised) out += " slow:" + std::to_string(r);
  return out;
}

// The verdicts of a replay settled once, after the last event.
std::vector<StepVerdict> SettleOnce(const std::vector<RecordedEvent>& events, StragglerJoin* join) {
  ReplayRecordedEvents(events, 0, join);
  return join->Settle(LastTimestamp(events) + StragglerOptions{}.settle_ns);
}

// The verdicts of a replay settled after every event, as the daemon's periodic settle does.
std::vector<StepVerdict> SettleAlong(const std::vector<RecordedEvent>& events) {
  StragglerJoin join;
  std::vector<StepVerdict> out;
  for (const RecordedEvent& e : events) {
    ReplayRecordedEvents({e}, 0, &join);
    for (StepVerdict& v : join.Settle(e.kind == 'I' ? e.b : e.a)) out.push_back(std::move(v));
  }
  for (StepVerdict& v : join.Settle(UINT64_MAX)) out.push_back(std::move(v));
  return out;
}

// Compares the verdicts with the run's golden (or writes it, SEQPOINT_UPDATE_GOLDEN).
void CheckGolden(const std::string& run, const std::vector<StepVerdict>& verdicts) {
  std::string text =
      "# agent/fleet/straggler_events_test: the verdicts replayed from rank0.csv, rank1.csv\n"
      "# iter last_rank lag_ns lag_share token_excess straggles cause [slow:<rank raised>]\n";
  for (const StepVerdict& v : verdicts) text += Format(v) + "\n";
  const std::string path = Golden(run) + "/verdicts.txt";
  if (std::getenv("SEQPOINT_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path) << text;
    MESSAGE("wrote " << path);
  }
  std::ifstream in(path);
  std::stringstream want;
  want << in.rdbuf();
  CHECK_MESSAGE(want.str() == text, path << " differs; got:\n" << text);
}

}  // namespace

TEST_CASE("fleet straggler events: a job's traces read as the probes' events, in time order") {
  const std::vector<RecordedEvent> events = Load("slow");
  size_t ranks = 0, iterations = 0, arrivals = 0;
  uint64_t last = 0;
  for (const RecordedEvent& e : events) {
    if (e.kind == 'R') {
      CHECK(ranks == static_cast<size_t>(&e - events.data()));  // ranks first
      CHECK(e.pid == kTracePidBase + static_cast<uint32_t>(e.rank));
      ++ranks;
      continue;
    }
    const uint64_t at = e.kind == 'I' ? e.b : e.a;
    CHECK(at >= last);
    last = at;
    if (e.kind == 'I') {
      ++iterations;
      CHECK(e.a < e.b);
      CHECK(e.tokens == 8 * (e.tokens / 8));  // batch 8 x SL
    } else {
      ++arrivals;
    }
  }
  CHECK(ranks == 2);
  CHECK(iterations == 320);
  CHECK(arrivals == 320);
  CHECK(LastTimestamp(events) == last);
  CHECK(LastTimestamp({}) == 0);
}

TEST_CASE("fleet straggler events: the event file round-trips, and bad input is named") {
  const std::vector<RecordedEvent> events = Load("long");
  seqpoint::testing::ScratchDir dir;
  std::string text = "# recorded\n";
  for (const RecordedEvent& e : events) text += FormatRecordedEvent(e) + "\n";
  auto back = ReadRecordedEvents(dir.Write("run.events", text));
  REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  REQUIRE(back->size() == events.size());
  for (size_t i = 0; i < events.size(); ++i) CHECK(Same((*back)[i], events[i]));

  auto bad = ReadRecordedEvents(dir.Write("bad.events", "R 1 0\nI 1 7 512 100\n"));
  REQUIRE(!bad.ok());
  CHECK(bad.status().ToString().find(dir.File("bad.events") + ":2:") != std::string::npos);
  auto missing = ReadRecordedEvents(dir.File("none.events"));
  REQUIRE(!missing.ok());
  CHECK(missing.status().ToString().find("none.events") != std::string::npos);
  // A trace that is not the job's: named, with what is missing.
  auto other = ReadJobTraces({dir.Write("rank0.csv", "iter,seq_len,tokens,time_ns\n0,8,64,5\n")});
  REQUIRE(!other.ok());
  CHECK(other.status().ToString().find("mono_begin_ns") != std::string::npos);
}

TEST_CASE("fleet straggler events: a rank slowed 1.5x at equal SL, replayed: hardware, found") {
  const std::vector<RecordedEvent> events = Load("slow");
  StragglerJoin join;
  const std::vector<StepVerdict> verdicts = SettleOnce(events, &join);
  CheckGolden("slow", verdicts);
  REQUIRE(verdicts.size() == 160);
  // What the golden must say, whatever its figures: the sequential test alarms on rank 1 after
  // its slowdown began (step 100), never on rank 0; after it, rank 1 straggles as hardware in
  // most steps (every rank at the same SL: nothing is data).
  int alarms_on_1 = 0, alarms_on_0 = 0, hardware_after = 0;
  for (const StepVerdict& v : verdicts) {
    for (int32_t r : v.slow_raised) {
      if (r == 1 && v.iter >= 100) ++alarms_on_1;
      if (r == 0 || v.iter < 100) ++alarms_on_0;
    }
    if (v.iter >= 100 && v.straggles && v.last_rank == 1 && v.cause == StragglerCause::kHardware) {
      ++hardware_after;
    }
    CHECK(!(v.straggles && v.cause == StragglerCause::kData));
  }
  CHECK(alarms_on_1 == 1);
  CHECK(alarms_on_0 == 0);
  CHECK(hardware_after * 2 > 60);
  CHECK(join.counts().slow.at(1).slow);
  CHECK(!join.counts().slow.at(0).slow);
}

TEST_CASE(
    "fleet straggler events: a rank fed sequences twice as long, replayed: data, never slow") {
  const std::vector<RecordedEvent> events = Load("long");
  StragglerJoin join;
  const std::vector<StepVerdict> verdicts = SettleOnce(events, &join);
  CheckGolden("long", verdicts);
  REQUIRE(verdicts.size() == 24);
  int data = 0;
  for (const StepVerdict& v : verdicts) {
    if (v.straggles && v.last_rank == 1) {
      CHECK(v.cause == StragglerCause::kData);
      ++data;
    }
    CHECK(v.slow_raised.empty());
  }
  CHECK(data * 2 > 24);
  // Never at equal SL with its peer: the sequential test never compares it.
  for (const auto& [rank, st] : join.counts().slow) CHECK(st.tested == 0);
}

TEST_CASE("fleet straggler events: the verdicts do not depend on when steps are settled") {
  for (const std::string run : {"slow", "long"}) {
    const std::vector<RecordedEvent> events = Load(run);
    StragglerJoin join;
    const std::vector<StepVerdict> once = SettleOnce(events, &join);
    const std::vector<StepVerdict> along = SettleAlong(events);
    REQUIRE(once.size() == along.size());
    for (size_t i = 0; i < once.size(); ++i) CHECK(Format(once[i]) == Format(along[i]));
  }
}

TEST_CASE("fleet straggler events: replayed into the book, the run's counts are the join's") {
  const std::vector<RecordedEvent> events = Load("slow");
  StragglerBook book;
  const int64_t shift = -1'000'000'000;  // times moved back: the same verdicts
  ReplayRecordedEvents(events, 7, shift, &book);
  book.Settle(LastTimestamp(events) + shift + StragglerOptions{}.settle_ns);
  StragglerJoin join;
  SettleOnce(events, &join);
  const StragglerJoin* replayed = book.join(7);
  REQUIRE(replayed != nullptr);
  const StragglerCounts& got = replayed->counts();
  const StragglerCounts& want = join.counts();
  CHECK(got.steps == 160);
  CHECK(got.steps == want.steps);
  CHECK(got.straggler_steps == want.straggler_steps);
  CHECK(got.lag_seconds == want.lag_seconds);
  CHECK(got.last_by_rank == want.last_by_rank);
  CHECK(got.unmatched == 0);
  CHECK(got.incomplete == 0);
  REQUIRE(got.slow.size() == 2);
  CHECK(got.slow.at(1).alarms == want.slow.at(1).alarms);
  CHECK(got.slow.at(1).alarm_step == want.slow.at(1).alarm_step);
  auto runs = book.Snapshot([](int64_t) { return std::string("job"); });
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].run == 7);
}
