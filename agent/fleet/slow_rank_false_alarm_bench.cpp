// The live false-alarm rate of the slow-rank test under load (issue 23; figures in docs/fleet.md):
// healthy data-parallel jobs (equal ranks: nobody slowed on purpose) watched by a private
// seqpointd, with and without a CPU hog (a busy shell loop) beside them, every alarm the daemon
// raised classified by the ranks' own clocks (OwnSlowdown over the 64 steps up to the alarm, the
// daemon's statistic read from the workload's traces): "real" when the rank was slower by at
// least the floor the daemon stated then, "near" when by at least half of it (what the e2e test
// accepts: load beside a job slows one rank for real), else "false" (named, not slower). A bench,
// not a test: it runs only with SEQPOINT_SLOW_RANK_FALSE_ALARM_BENCH=<out.csv>
// (bench/fleet/slow_rank_false_alarms.sh). Rank-steps: the ranks' steps the daemon judged;
// tested: those past each rank's warm-up (64 compared steps), the only ones that can alarm.
// replayed: the daemon's alarms that the same test replayed on the ranks' own clocks also raised
// (within 16 steps; OwnClockAlarms): those came from the ranks' real timings, not the observer;
// own_alarms: the replay's alarms. Per alarm (detail): rank@step, the own clocks' ratio over the
// 64 steps before it and over the 8 before it (a burst), the daemon's ratio, the floor, the class.
// Environment: JOBS (3 per hog setting), HOGS (0,1), RANKS (2), STEPS (500).
#include <doctest/doctest.h>
#include <unistd.h>

#include <fstream>

#include "agent/fleet/testing/live_ddp_job.h"

using namespace seqpoint::daemon::fleet::testing;

namespace {

int EnvInt(const char* name, int def) {
  return std::getenv(name) ? std::atoi(std::getenv(name)) : def;
}

std::vector<int> EnvInts(const char* name, const char* def) {
  const char* v = std::getenv(name);
  std::istringstream in(v ? v : def);
  std::vector<int> out;
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

TEST_CASE("slow rank false alarm bench: healthy live jobs, alarms by the ranks' own clocks") {
  const char* out_path = std::getenv("SEQPOINT_SLOW_RANK_FALSE_ALARM_BENCH");
  if (out_path == nullptr) {
    MESSAGE("skipped: set SEQPOINT_SLOW_RANK_FALSE_ALARM_BENCH=<file> to run it (bench/fleet/)");
    return;
  }
  if (!CanRunLiveDdp()) return;
  const int jobs = EnvInt("JOBS", 3), ranks = EnvInt("RANKS", 2), steps = EnvInt("STEPS", 500);
  std::ofstream out(out_path);
  out << "hog,ranks,job,rank_steps,tested,alarms,real,near,false,replayed,own_alarms,floors,"
         "mean_step_ms,detail\n";
  for (int hog : EnvInts("HOGS", "0,1")) {
    for (int job_no = 0; job_no < jobs; ++job_no) {
      const auto busy = StartCpuHog(hog > 0);
      TempDir dir;
      Seqpointd d(dir, {}, "seqpointd.log");
      REQUIRE(d.Ready());
      const std::string key = "slow-rank-false-alarms-" + std::to_string(getpid()) + "-" +
                              std::to_string(hog) + "-" + std::to_string(job_no);
      LiveJobSpec spec;
      spec.ranks = ranks;
      spec.steps = steps + 200;  // headroom: the bench stops the ranks once `steps` are judged
      LiveDdpJob job(d, dir, key, spec);
      AlarmLog log;
      const auto t0 = std::chrono::steady_clock::now();
      json last = job.PollUntil([&](const json& s) { return s["steps"].get<int>() >= steps; },
                                [&](const json& s) { log.Read(s); }, std::chrono::seconds(600));
      const double wall_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      REQUIRE_MESSAGE(!last.is_null(), d.Log());
      job.Freeze();
      json s = job.SlowRanks();
      if (s.is_null()) s = last;  // the run closed: its last reading while polled
      log.Read(s);
      uint64_t rank_steps = 0, tested = 0;
      double lo = 0, hi = 0;  // the ranks' floors at the end
      for (const json& r : s["ranks"]) {
        rank_steps += r["seen"].get<uint64_t>();
        const uint64_t t = r["tested"];
        tested += t >= 64 ? t - 63 : 0;
        if (r["detectable_slowdown"].is_number()) {
          const double f = r["detectable_slowdown"];
          lo = lo == 0 ? f : std::min(lo, f);
          hi = std::max(hi, f);
        }
      }
      int real = 0, near = 0, wrong = 0, replayed = 0;
      const auto own_alarms = OwnClockAlarms(dir, ranks);
      std::ostringstream detail;
      for (const SeenAlarm& a : log.alarms()) {
        const double own = OwnSlowdown(dir, a.rank, ranks, a.step);
        const double floor = a.floor > 0 ? a.floor : 1.1;
        const char* cls = own >= floor ? "real" : own >= 1 + (floor - 1) / 2 ? "near" : "false";
        (own >= floor ? real : own >= 1 + (floor - 1) / 2 ? near : wrong)++;
        const bool same = OwnClockAlarmNear(own_alarms, a.rank, a.step);
        replayed += same ? 1 : 0;
        detail << (detail.tellp() > 0 ? ";" : "") << a.rank << "@" << a.step << ":x" << own
               << "/8:x" << OwnSlowdown(dir, a.rank, ranks, a.step, 8) << "(daemon x"
               << a.daemon_ratio << " floor " << floor << " " << cls
               << (same ? " replayed" : " NOT-replayed") << ")";
      }
      const uint64_t judged = s["steps"];
      char floors[48];
      std::snprintf(floors, sizeof floors, "%.2f-%.2f", lo, hi);
      out << hog << "," << ranks << "," << job_no << "," << rank_steps << "," << tested << ","
          << log.alarms().size() << "," << real << "," << near << "," << wrong << "," << replayed
          << "," << own_alarms.size() << "," << floors << ","
          << (judged > 0 ? 1e3 * wall_s / static_cast<double>(judged) : 0) << "," << detail.str()
          << "\n";
      out.flush();
      MESSAGE("hog " << hog << " job " << job_no << ": " << rank_steps << " rank-steps, "
                     << log.alarms().size() << " alarms (" << wrong << " false) " << detail.str());
    }
  }
}
