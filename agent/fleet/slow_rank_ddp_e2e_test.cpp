// The slow-rank verdict and its detection floor as an operator reads them while a real
// data-parallel job runs (issue 23): seqpointd watches a 2-rank PyTorch DDP job over gloo
// (bench/fleet/ddp_straggler_job.py, length-bucketed batches: both ranks the same SL every step)
// and judges its steps at the collectives (agent/fleet/straggler.h, slow_rank.h). With rank 1's
// compute before the all-reduce 1.5x its own (spun in the DDP hook), `seqpoint show RUN` must name
// rank 1 and no other (measured here: named at step 79, floor 1.14x); with equal ranks it names
// none and prints the floor that "none" stands for. --json carries slow_ranks, and /metrics carries
// both detectable-slowdown families with the values show prints. The same with 4 ranks (rank 2
// 1.5x as slow): named, the other three not.
//
// Holds on a loaded 2-core machine: nothing here depends on how fast a step runs, only on the
// verdicts, read once the daemon has judged every step the ranks ran (LiveDdpJob::Freeze). A
// floor that comes out high under load is allowed (it says so: builds beside this job have
// raised the ranks' long-run noise to 0.6-1.3 in log units, floors 2.8-5x), and then a 1.5x rank
// not named is too; missing a slowdown the floor promised never is. Load beside the job can also
// slow one of two equal ranks for real (seen while a build ran: x1.23 by the ranks' own clocks):
// a rank named without a slowdown of ours is checked against the ranks' own traces, and naming
// one that was not slower by its own clock fails (CheckAlarmsTrue).
// Needs root (eBPF) and python3-torch; skips with the reason otherwise. The detection delays
// with and without a CPU hog beside the job are slow_rank_live_bench.cpp's, the false alarms on
// healthy jobs slow_rank_false_alarm_bench.cpp's.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>

#include "agent/fleet/testing/live_ddp_job.h"

using namespace seqpoint::daemon::fleet::testing;

namespace {

// The rank entry of `rank` in slow_ranks.
json RankOf(const json& slow, int rank) {
  for (const json& r : slow["ranks"]) {
    if (r["rank"] == rank) return r;
  }
  return json();
}

// The daemon's verdicts as the three readers see them, after the ranks stopped: show's text, its
// --json, and /metrics agree.
void CheckReadersAgree(Seqpointd& d, LiveDdpJob& job, const TempDir& dir, const json& slow) {
  const std::string text = job.Cli("", dir);
  MESSAGE(text.substr(text.find("\nslow ranks")));
  REQUIRE(text.find("\nslow ranks (") != std::string::npos);
  const json cli = json::parse(job.Cli("--json", dir));
  REQUIRE(cli.contains("slow_ranks"));
  CHECK(cli["slow_ranks"] == slow);  // frozen: the same steps, the same state
  const int64_t run = cli["run"]["id"];
  const std::string metrics = d.Metrics();
  const auto floors = RunSamples(metrics, "seqpoint_run_rank_detectable_slowdown", run);
  const auto run_floor = RunSamples(metrics, "seqpoint_run_detectable_slowdown", run);
  REQUIRE(slow["detectable_slowdown"].is_number());
  REQUIRE(run_floor.count("") == 1);
  CHECK(run_floor.at("") == doctest::Approx(slow["detectable_slowdown"].get<double>()));
  char line[96];
  std::snprintf(line, sizeof line, "finds a slowdown of %.2fx or more within 100 steps",
                slow["detectable_slowdown"].get<double>());
  CHECK_MESSAGE(text.find(line) != std::string::npos, text);
  for (const json& r : slow["ranks"]) {
    const std::string rank = std::to_string(r["rank"].get<int>());
    REQUIRE(r["detectable_slowdown"].is_number());
    REQUIRE(floors.count(rank) == 1);
    CHECK(floors.at(rank) == doctest::Approx(r["detectable_slowdown"].get<double>()));
    std::snprintf(line, sizeof line, "floor %.2fx", r["detectable_slowdown"].get<double>());
    CHECK_MESSAGE(text.find("rank " + rank) != std::string::npos, text);
    CHECK_MESSAGE(text.find(line) != std::string::npos, text);
  }
  const auto slower = RunSamples(metrics, "seqpoint_run_rank_slower_than_peers", run);
  for (const json& r : slow["ranks"]) {
    const std::string rank = std::to_string(r["rank"].get<int>());
    REQUIRE(slower.count(rank) == 1);
    CHECK(slower.at(rank) == (r["slow"].get<bool>() ? 1.0 : 0.0));
  }
}

// A rank the daemon alarmed on, where none was slowed on purpose, must have been slower by the
// workload's own clock: by at least half the slowdown its floor promises to find over the 64
// steps up to its last alarm, or in a burst that the same test replayed on the ranks' own clocks
// also alarms on (OwnClockAlarms: the daemon then reported the ranks' real timings; the rate of
// such burst alarms on healthy jobs under load is slow_rank_false_alarm_bench.cpp's,
// docs/fleet.md). Load beside the job (other tests, builds) slows one rank for real; an alarm that
// the ranks' own clocks do not give is the observer's fault (a mis-joined step, a wrong step
// number) and fails.
void CheckAlarmsTrue(const TempDir& dir, const json& slow, int rank, int ranks = 2) {
  const json r = RankOf(slow, rank);
  REQUIRE(!r.is_null());
  if (r["alarms"].get<uint64_t>() == 0) {
    CHECK(r["slow"] == false);
    return;
  }
  REQUIRE(r["alarm_step"].is_number());
  const int64_t step = r["alarm_step"];
  const double floor =
      r["detectable_slowdown"].is_number() ? r["detectable_slowdown"].get<double>() : 1.0;
  const double own = OwnSlowdown(dir, rank, ranks, step);
  const bool replayed = OwnClockAlarmNear(OwnClockAlarms(dir, ranks), rank, step);
  MESSAGE("rank " << rank << " alarmed at step " << step << "; by its own clock x" << own
                  << " its peers over the 64 steps before, x"
                  << OwnSlowdown(dir, rank, ranks, step, 8) << " over the 8 before (floor " << floor
                  << "x); the test on the own clocks alarms there too: " << replayed);
  CHECK_MESSAGE((own >= 1 + (floor - 1) / 2 || replayed),
                "rank " << rank << " named slow, but by its own clock it was not: a false alarm");
}

// Both ranks out of warm-up (a floor is known) and `tested` compared steps past it.
bool Judged(const json& s, uint64_t tested, size_t ranks = 2) {
  if (s["ranks"].size() != ranks || !s["detectable_slowdown"].is_number()) return false;
  for (const json& r : s["ranks"]) {
    if (r["tested"].get<uint64_t>() < tested) return false;
  }
  return true;
}

// Runs `ranks` ranks with `slow_rank`'s compute 1.5x its own from the first step, and checks the
// verdict once every rank is past warm-up and 100 compared steps (or near the job's end, where the
// noise hid the slowdown: then the floor must say so): the slow rank named, and no other unless
// the ranks' own clocks say it was slower too.
void CheckSlowRankNamed(int ranks, int slow_rank) {
  TempDir dir;
  Seqpointd d(dir, {}, "seqpointd.log");
  REQUIRE(d.Ready());
  const std::string key = "slow-rank-e2e-" + std::to_string(ranks) + "-" + std::to_string(getpid());
  LiveJobSpec spec;
  spec.ranks = ranks;
  spec.steps = 1500;  // an upper bound: the test stops the ranks once the verdict is in
  spec.slow_rank = slow_rank;
  spec.slow_factor = 1.5;
  LiveDdpJob job(d, dir, key, spec);
  std::map<int, uint64_t> max_alarms;  // an alarm count never goes back
  json slow = job.PollUntil(
      [&](const json& s) {
        const json r = RankOf(s, slow_rank);
        const bool named = !r.is_null() && r["slow"].get<bool>();
        return Judged(s, 64 + 100, static_cast<size_t>(ranks)) &&
               (named || s["steps"].get<int64_t>() + 200 > spec.steps);
      },
      [&](const json& s) {
        for (const json& r : s["ranks"]) {
          max_alarms[r["rank"]] = std::max<uint64_t>(max_alarms[r["rank"]], r["alarms"]);
        }
      });
  REQUIRE_MESSAGE(!slow.is_null(), d.Log());
  REQUIRE_MESSAGE(job.Running(), "the job ended before its steps were judged: " << slow.dump());
  job.Freeze();
  slow = job.SlowRanks();
  MESSAGE(slow.dump());
  REQUIRE(!slow.is_null());
  REQUIRE(slow["ranks"].size() == static_cast<size_t>(ranks));
  // Never an equal rank, unless it was in truth slower (load beside the job).
  for (const json& r : slow["ranks"]) {
    const int rank = r["rank"];
    if (r["alarms"].get<uint64_t>() < max_alarms[rank])
      FAIL("rank " << rank << "'s alarms went back");
    if (rank != slow_rank) CheckAlarmsTrue(dir, slow, rank, ranks);
  }
  CheckReadersAgree(d, job, dir, slow);
  const json named = RankOf(slow, slow_rank);
  REQUIRE(named["detectable_slowdown"].is_number());
  const double floor = named["detectable_slowdown"];
  const std::string id = std::to_string(slow_rank);
  if (named["slow"] == true) {
    bool listed = false;
    for (const json& r : slow["slow"]) listed = listed || r == slow_rank;
    CHECK(listed);
    CHECK(named["alarm_step"].is_number());
    CheckAlarmsTrue(dir, slow, slow_rank, ranks);  // the ranks' own clocks agree
    CHECK(named["compute_ratio"].get<double>() > 1.2);
    CHECK(job.Cli("", dir).find("rank " + id + " SLOWER") != std::string::npos);
    if (floor >= 1.5) MESSAGE("named although the floor (" << floor << "x) did not promise it");
  } else {
    // Not named in all the job's steps: only honest if the floor said 1.5x was out of reach.
    MESSAGE("rank " << id << " not named in " << slow["steps"] << " steps; its floor " << floor
                    << "x");
    CHECK_MESSAGE(floor >= 1.5, "the floor promised a 1.5x slowdown within 100 steps");
  }
}

}  // namespace

// Measured on this 2-core VM shared with builds: floors 1.13-1.14x, named at step 79.
TEST_CASE("slow rank ddp e2e: a rank 1.5x as slow is named while the job runs, none other") {
  if (!CanRunLiveDdp()) return;
  CheckSlowRankNamed(2, 1);
}

// 4 ranks on 2 cores: each rank is compared with the median of its 3 peers, so one slow rank does
// not make its peers look fast (as it does with 2, where each is the other's only peer). Measured
// at load average 6: rank 2 named at step 153 (floor 1.37x), the others' floors 1.45-2.25x, 38 s.
TEST_CASE("slow rank ddp e2e: 4 ranks, one 1.5x as slow: named, the other three not") {
  if (!CanRunLiveDdp()) return;
  CheckSlowRankNamed(4, 2);
}

TEST_CASE("slow rank ddp e2e: equal ranks: none named, and the floor that none stands for") {
  if (!CanRunLiveDdp()) return;
  TempDir dir;
  Seqpointd d(dir, {}, "seqpointd.log");
  REQUIRE(d.Ready());
  const std::string key = "slow-rank-e2e-equal-" + std::to_string(getpid());
  LiveJobSpec spec;
  spec.steps = 1500;
  LiveDdpJob job(d, dir, key, spec);
  json slow = job.PollUntil([](const json& s) { return Judged(s, 64 + 100); }, [](const json&) {});
  REQUIRE_MESSAGE(!slow.is_null(), d.Log());
  REQUIRE_MESSAGE(job.Running(), "the job ended before its steps were judged: " << slow.dump());
  job.Freeze();
  slow = job.SlowRanks();
  MESSAGE(slow.dump());
  REQUIRE(!slow.is_null());
  for (int rank : {0, 1}) CheckAlarmsTrue(dir, slow, rank);
  CheckReadersAgree(d, job, dir, slow);
  if (slow["slow"].empty()) {
    CHECK(job.Cli("", dir).find("steps judged): none; finds a slowdown of") != std::string::npos);
  }
}
