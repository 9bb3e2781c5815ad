// How many steps the live daemon takes to name a slowed rank of a real 2-rank DDP job, beside the
// detection floor it stated before the slowdown (issue 23; figures in docs/fleet.md). A bench,
// not a test: it runs only with SEQPOINT_SLOW_RANK_LIVE_BENCH=<out.csv> (bench/fleet/
// slow_rank_live.sh). Per run: a fresh seqpointd, the job (testing/live_ddp_job.h) with rank 1's
// compute F times as long from step SLOW_FROM on, with or without a CPU hog (a busy shell loop)
// beside it; show polled every 250 ms. Columns: hog, factor, rep, floor_before (rank 1's floor at
// the last reading before the slowdown; empty: not known), found_steps (its alarm's step minus
// SLOW_FROM; -1: not within AFTER steps), false_alarms (rank 0, or rank 1 before SLOW_FROM),
// first_alarm (rank 1's first alarm step seen; -1: none), steps (judged), mean_step_ms (wall
// time per judged step while polled), and for every alarm not caused by the slowdown (rank 0's,
// rank 1's before SLOW_FROM) the rank, its step, the daemon's compute ratio then, the ranks' own
// clocks' (OwnSlowdown over the 64 and the 8 steps up to it), and whether the same test replayed
// on the ranks' own clocks raised it too (OwnClockAlarms, within 16 steps: then it came from the
// ranks' real timings, not from the observer): false_detail, "rank@step:daemon/own64/own8/
// replayed" joined by ';'.
// Environment: FACTORS (1.1,1.25,1.5), HOGS (0,1), REPS (1), SLOW_FROM (150), AFTER (300).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "agent/fleet/testing/live_ddp_job.h"

using namespace seqpoint::daemon::fleet::testing;

namespace {

std::vector<double> EnvList(const char* name, const char* def) {
  const char* v = std::getenv(name);
  std::istringstream in(v ? v : def);
  std::vector<double> out;
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stod(item));
  return out;
}

int EnvInt(const char* name, int def) {
  return std::getenv(name) ? std::atoi(std::getenv(name)) : def;
}

json RankOf(const json& slow, int rank) {
  for (const json& r : slow["ranks"]) {
    if (r["rank"] == rank) return r;
  }
  return json();
}

}  // namespace

TEST_CASE("slow rank live bench: steps to name a slowed rank, beside the floor") {
  const char* out_path = std::getenv("SEQPOINT_SLOW_RANK_LIVE_BENCH");
  if (out_path == nullptr) {
    MESSAGE("skipped: set SEQPOINT_SLOW_RANK_LIVE_BENCH=<file> to run it (bench/fleet/)");
    return;
  }
  if (!CanRunLiveDdp()) return;
  const int slow_from = EnvInt("SLOW_FROM", 150), after = EnvInt("AFTER", 300);
  const int reps = EnvInt("REPS", 1);
  std::ofstream out(out_path);
  out << "hog,factor,rep,floor_before,found_steps,false_alarms,first_alarm,steps,mean_step_ms,"
         "false_detail\n";
  for (double hog : EnvList("HOGS", "0,1")) {
    for (double factor : EnvList("FACTORS", "1.1,1.25,1.5")) {
      for (int rep = 0; rep < reps; ++rep) {
        const auto busy = StartCpuHog(hog > 0);
        TempDir dir;
        Seqpointd d(dir, {}, "seqpointd.log");
        REQUIRE(d.Ready());
        const std::string key = "slow-rank-bench-" + std::to_string(getpid()) + "-" +
                                std::to_string(static_cast<int>(hog)) + "-" +
                                std::to_string(factor) + "-" + std::to_string(rep);
        LiveJobSpec spec;
        spec.steps = slow_from + after;
        spec.slow_rank = 1;
        spec.slow_factor = factor;
        spec.slow_from = slow_from;
        LiveDdpJob job(d, dir, key, spec);
        double floor_before = 0;
        uint64_t seen_before = 0, false_alarms = 0, first_seen = 0;
        int64_t found = -1, first_alarm = -1;
        bool early = false;  // rank 1 alarmed before its slowdown
        AlarmLog log;
        const auto t0 = std::chrono::steady_clock::now();
        double first_s = 0, last_s = 0;
        json last = job.PollUntil(
            [&](const json&) { return found >= 0; },
            [&](const json& s) {
              const json r1 = RankOf(s, 1), r0 = RankOf(s, 0);
              if (r1.is_null() || r0.is_null()) return;
              log.Read(s);
              const double now_s =
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
              const uint64_t seen = r1["seen"];
              if (first_seen == 0) first_seen = seen, first_s = now_s;
              last_s = now_s;
              if (seen <= static_cast<uint64_t>(slow_from) && seen >= seen_before) {
                seen_before = seen;
                floor_before = r1["detectable_slowdown"].is_number()
                                   ? r1["detectable_slowdown"].get<double>()
                                   : 0;
              }
              false_alarms = r0["alarms"].get<uint64_t>() + (early ? 1 : 0);
              if (r1["alarm_step"].is_number()) {
                if (first_alarm < 0) first_alarm = r1["alarm_step"].get<int64_t>();
                const int64_t at = r1["alarm_step"].get<int64_t>() - slow_from;
                if (at < 0) {
                  if (!early) ++false_alarms;
                  early = true;
                } else if (found < 0) {
                  found = at;
                }
              }
            },
            std::chrono::seconds(900));
        const uint64_t steps = last.is_null() ? 0 : last["steps"].get<uint64_t>();
        const uint64_t seen_last =
            RankOf(last, 1).is_null() ? 0 : RankOf(last, 1)["seen"].get<uint64_t>();
        const double step_ms =
            seen_last > first_seen
                ? 1e3 * (last_s - first_s) / static_cast<double>(seen_last - first_seen)
                : 0;
        std::ostringstream detail;
        const auto own_alarms = OwnClockAlarms(dir, 2);
        for (const SeenAlarm& a : log.alarms()) {
          if (a.rank == 1 && a.step >= slow_from) continue;  // the slowdown's
          detail << (detail.tellp() > 0 ? ";" : "") << a.rank << "@" << a.step << ":"
                 << a.daemon_ratio << "/" << OwnSlowdown(dir, a.rank, 2, a.step) << "/"
                 << OwnSlowdown(dir, a.rank, 2, a.step, 8) << "/"
                 << (OwnClockAlarmNear(own_alarms, a.rank, a.step) ? "yes" : "no");
        }
        out << hog << "," << factor << "," << rep << ","
            << (floor_before > 0 ? std::to_string(floor_before) : "") << "," << found << ","
            << false_alarms << "," << first_alarm << "," << steps << "," << step_ms << ","
            << detail.str() << "\n";
        out.flush();
        MESSAGE("hog " << hog << " x" << factor << ": floor before " << floor_before
                       << ", found after " << found << " steps, false alarms " << false_alarms);
      }
    }
  }
}
