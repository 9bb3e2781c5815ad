// The slow-rank test (slow_rank.h) replayed on real healthy data-parallel runs: each rank's own
// trace from bench/fleet/ddp_straggler_job.py (4 ranks, gloo DDP on a 2-CPU VM shared with other
// builds, 600 steps, no agent attached), read as the probes' events (straggler_events.h) and fed
// through one run's StragglerJoin, as the daemon does. Kept in tests/golden/:
//   straggler_healthy_quiet_random    --batching random --seed 13, no busy loop of ours beside
//   straggler_healthy_hog1_bucketed   --batching bucketed --seed 12, one busy loop (first 60 s)
//   straggler_healthy_hog2_switching  --batching bucketed --seed 14, two busy loops, 5 s on/off
//   straggler_healthy_hog2_bucketed   --batching bucketed --seed 15, two busy loops (first 90 s)
//   straggler_healthy_hog1_random     --batching random --seed 16, one busy loop (first 90 s)
// (each: /usr/bin/python3 bench/fleet/ddp_straggler_job.py --ranks 4 --steps 600 --no-wait ...),
// and the live probes' events of one more such run (--batching random, with the agent's probes
// attached, recorded by straggler_ddp_test: SEQPOINT_STRAGGLER_RECORD, SLOW_FROM=300
// SCENARIOS=unslowed FACTORS=1 BATCHING=random bench/fleet/stragglers.sh), recorded after the
// noise model was chosen: straggler_healthy_live_probes.events.
// No rank is slowed, so every alarm is false. Besides the count (none), the margin: the largest
// CUSUM any healthy rank reached, as a share of its threshold. The noise model was chosen on
// these and on other recordings (bench/fleet/slow_rank_replay.sh): the test guards what was
// measured against regressions; it is not an independent estimate of the false-alarm rate.
// The same recordings with one rank slowed 1.05x-1.5x (InjectSlowdown) check the detection floor
// (slow_rank.h: DetectionFloor) against what the test finds within 100 steps (docs/fleet.md);
// SEQPOINT_SLOW_RANK_FLOOR=<out.csv> writes each case.
//
// With SEQPOINT_SLOW_RANK_BENCH=<out.csv> and SEQPOINT_SLOW_RANK_RUNS=<dir>[:<rank>:<from>],...
// the bench case replays other recorded runs (bench/fleet/slow_rank_replay.sh; a <dir> may also
// be a file of the live probes' events, SEQPOINT_STRAGGLER_RECORD of straggler_ddp_test): false
// alarms, and the steps and seconds to find rank <rank> slowed from step <from>.
#include <doctest/doctest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "agent/fleet/straggler.h"
#include "agent/fleet/straggler_events.h"
#include "common/testing/scratch_dir.h"

using namespace seqpoint::daemon::fleet;

namespace {

// A recorded run replayed: its alarms and its healthy ranks' margin.
struct Replayed {
  uint64_t steps = 0;
  uint64_t tested = 0;                               // rank-steps the sequential test saw
  std::vector<std::pair<uint64_t, int32_t>> raised;  // (step, rank) of each alarm
  double peak = 0;  // the largest S / h of a rank not alarmed (and not `except`), at a settle
  std::map<uint64_t, uint64_t> begin_ns, end_ns;  // per step, the first begin and the last end
  double floor = 0;  // the `except` rank's detection floor before the slowdown (0: not warm)
};

// The rank csvs of a trace directory: rank0.csv, rank1.csv, ... while they exist.
std::vector<std::string> RankCsvs(const std::string& dir) {
  std::vector<std::string> out;
  for (int r = 0; std::filesystem::exists(dir + "/rank" + std::to_string(r) + ".csv"); ++r) {
    out.push_back(dir + "/rank" + std::to_string(r) + ".csv");
  }
  return out;
}

// The events of `dir`: a job's trace directory, or a file of the probes' recorded events.
std::vector<RecordedEvent> Load(const std::string& dir) {
  const bool traces = !std::filesystem::is_regular_file(dir);
  const std::vector<std::string> csvs = traces ? RankCsvs(dir) : std::vector<std::string>{};
  REQUIRE_MESSAGE((!traces || csvs.size() >= 2), dir << ": fewer than two rank<r>.csv");
  auto events = traces ? ReadJobTraces(csvs) : ReadRecordedEvents(dir);
  REQUIRE_MESSAGE(events.ok(), events.status().ToString());
  return *std::move(events);
}

// Replays `events` into one run's join, settling after every event as the daemon's periodic
// settle does; `except`: a rank left out of the margin (the slowed one), whose detection floor
// is read as it stood before step `from` was judged.
Replayed Replay(const std::vector<RecordedEvent>& events, int32_t except = -1, uint64_t from = 0) {
  StragglerJoin join;
  Replayed out;
  auto take = [&](const std::vector<StepVerdict>& verdicts) {
    bool before = false;
    for (const StepVerdict& v : verdicts) {
      ++out.steps;
      before = before || v.iter < from;
      for (int32_t r : v.slow_raised) out.raised.push_back({v.iter, r});
    }
    for (const auto& [rank, s] : join.counts().slow) {
      if (rank != except && !s.slow && s.threshold > 0) {
        out.peak = std::max(out.peak, s.cusum / s.threshold);
      }
      if (rank == except && before) out.floor = s.floor;
    }
  };
  for (const RecordedEvent& e : events) {
    ReplayRecordedEvents({e}, 0, &join);
    if (e.kind == 'I') {
      auto [b, fresh] = out.begin_ns.emplace(e.iter, e.a);
      if (!fresh) b->second = std::min(b->second, e.a);
      out.end_ns[e.iter] = std::max(out.end_ns[e.iter], e.b);
    }
    take(join.Settle(e.kind == 'I' ? e.b : e.a));
  }
  take(join.Settle(UINT64_MAX));
  for (const auto& [rank, s] : join.counts().slow) out.tested += s.tested;
  return out;
}

Replayed Replay(const std::string& dir, int32_t except = -1) { return Replay(Load(dir), except); }

}  // namespace

TEST_CASE("fleet slow rank replay: healthy DDP runs, with and without CPU hogs, raise no alarm") {
  const std::string golden = seqpoint::testing::SourceDir() + "/tests/golden/straggler_healthy_";
  uint64_t tested = 0;
  for (const std::string run : {"quiet_random", "hog1_bucketed", "hog2_switching", "hog2_bucketed",
                                "hog1_random", "live_probes.events"}) {
    const Replayed r = Replay(golden + run);
    CHECK(r.steps == 600);
    std::ostringstream alarms;
    for (const auto& [step, rank] : r.raised) alarms << " rank " << rank << " at step " << step;
    CHECK_MESSAGE(r.raised.empty(), run << ": false alarms:" << alarms.str());
    CHECK(r.peak < 1);
    MESSAGE(run << ": " << r.tested << " tested rank-steps, " << r.raised.size()
                << " false alarms, largest healthy CUSUM " << r.peak << " of its threshold");
    tested += r.tested;
  }
  CHECK(tested > 11000);  // every rank tested in most steps, even with random SLs
}

TEST_CASE(
    "fleet slow rank replay: the detection floor predicts which injected slowdowns are found") {
  // Each healthy recording with one rank's compute stretched 1.05x-1.5x from a step on
  // (InjectSlowdown: the real noise of the real run, a known slowdown): the floor the rank showed
  // before the slowdown (the smallest slowdown found within floor_steps = 100 steps in 9 cases of
  // 10) against whether the test raised its alarm within 100 steps. The floor is a delay's 90th
  // percentile, so near it either answer comes; away from it (a slowdown at least 1.5x the floor's,
  // or at most 2/3 of it) the prediction must hold.
  const std::string golden = seqpoint::testing::SourceDir() + "/tests/golden/straggler_healthy_";
  const uint64_t horizon = static_cast<uint64_t>(SlowRankOptions{}.floor_steps);
  struct Tally {
    int cases = 0, predicted = 0, found = 0, agree = 0, clear = 0, clear_agree = 0;
    int missed = 0, clear_missed = 0;  // predicted found, not found: the floor promised too much
  };
  std::map<double, Tally> by_factor;
  int others = 0;  // alarms on the ranks not slowed (their data is the healthy recording's)
  std::ofstream csv(std::getenv("SEQPOINT_SLOW_RANK_FLOOR")
                        ? std::getenv("SEQPOINT_SLOW_RANK_FLOOR")
                        : "/dev/null");
  csv << "run,rank,from,factor,floor,predicted,found_steps\n";
  for (const std::string run : {"quiet_random", "hog1_bucketed", "hog2_switching", "hog2_bucketed",
                                "hog1_random", "live_probes.events"}) {
    const std::vector<RecordedEvent> events = Load(golden + run);
    for (int32_t rank = 0; rank < 4; ++rank) {
      for (uint64_t from : {200, 400}) {
        for (double factor : {1.05, 1.1, 1.2, 1.5}) {
          const Replayed r = Replay(InjectSlowdown(events, rank, from, factor), rank, from);
          REQUIRE(r.floor > 0);
          uint64_t found = 0;  // steps to the alarm, 0: none within the horizon
          for (const auto& [step, who] : r.raised) {
            if (who == rank && step >= from && step < from + horizon && found == 0) {
              found = step - from + 1;
            }
            others += who != rank;
          }
          const bool predicted = factor >= r.floor;
          Tally& t = by_factor[factor];
          ++t.cases;
          t.predicted += predicted;
          t.found += found > 0;
          t.agree += predicted == (found > 0);
          t.missed += predicted && found == 0;
          if (factor - 1 >= 1.5 * (r.floor - 1) || 1.5 * (factor - 1) <= r.floor - 1) {
            ++t.clear;
            t.clear_agree += predicted == (found > 0);
            t.clear_missed += predicted && found == 0;
          }
          csv << run << "," << rank << "," << from << "," << factor << "," << r.floor << ","
              << predicted << "," << found << "\n";
        }
      }
    }
  }
  int clear = 0, clear_agree = 0, clear_missed = 0;
  for (const auto& [factor, t] : by_factor) {
    MESSAGE(factor << "x: " << t.cases << " cases, predicted found " << t.predicted << ", found "
                   << t.found << ", agree " << t.agree << " (promised, not found: " << t.missed
                   << "); away from the floor " << t.clear_agree << " of " << t.clear
                   << " (promised, not found: " << t.clear_missed << ")");
    clear += t.clear;
    clear_agree += t.clear_agree;
    clear_missed += t.clear_missed;
  }
  MESSAGE("alarms on the ranks not slowed: " << others);
  CHECK(clear >= 100);
  CHECK(clear_agree >= 0.9 * clear);
  CHECK(clear_missed <= 0.02 * clear);
}

TEST_CASE("fleet slow rank bench: recorded runs replayed (SEQPOINT_SLOW_RANK_BENCH)") {
  const char* out_path = std::getenv("SEQPOINT_SLOW_RANK_BENCH");
  const char* runs = std::getenv("SEQPOINT_SLOW_RANK_RUNS");
  if (out_path == nullptr || runs == nullptr) {
    MESSAGE(
        "skipped: set SEQPOINT_SLOW_RANK_BENCH=<out.csv> and SEQPOINT_SLOW_RANK_RUNS "
        "(bench/fleet/slow_rank_replay.sh)");
    return;
  }
  std::ofstream out(out_path);
  // false_before: alarms before the slowdown (any rank); others_after: on the other ranks after
  // it began (on 2 CPUs the slowed rank's spin takes CPU from its peers: not all of them false).
  out << "run,steps,tested_rank_steps,slow_rank,slow_from,false_before,others_after,healthy_peak,"
         "found_steps,found_s\n";
  std::stringstream list(runs);
  for (std::string item; std::getline(list, item, ',');) {
    std::string dir = item;
    int32_t rank = -1;
    uint64_t from = 0;
    if (const size_t c = item.find(':'); c != std::string::npos) {
      dir = item.substr(0, c);
      REQUIRE_MESSAGE(std::sscanf(item.c_str() + c, ":%" SCNd32 ":%" SCNu64, &rank, &from) == 2,
                      item << ": not <dir>:<rank>:<from>");
    }
    const Replayed r = Replay(dir, rank);
    int false_before = 0, others_after = 0;
    std::string found_steps = "-", found_s = "-";
    for (const auto& [step, who] : r.raised) {
      if (step < from || rank < 0) {
        ++false_before;
      } else if (who != rank) {
        ++others_after;
      } else if (found_steps == "-") {
        found_steps = std::to_string(step - from);
        char s[32];
        std::snprintf(s, sizeof s, "%.1f", (r.end_ns.at(step) - r.begin_ns.at(from)) / 1e9);
        found_s = s;
      }
    }
    if (rank >= 0 && found_steps == "-") found_steps = found_s = "not found";
    char peak[32];
    std::snprintf(peak, sizeof peak, "%.2f", r.peak);
    out << std::filesystem::path(dir).filename().string() << "," << r.steps << "," << r.tested
        << "," << rank << "," << from << "," << false_before << "," << others_after << "," << peak
        << "," << found_steps << "," << found_s << "\n";
  }
}
