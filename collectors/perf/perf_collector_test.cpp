// perf collector against a real child process: software events always (this VM lets root
// count another pid), hardware events where the machine exposes a PMU (skipped otherwise).
#include "collectors/perf/perf_collector.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <map>

#include "collectors/collectors_test_util.h"

namespace seqpoint::collectors {
namespace {

std::map<std::string, double> ByName(const std::vector<Sample>& samples) {
  std::map<std::string, double> m;
  for (const Sample& s : samples) m[s.name] = s.value;
  return m;
}

PerfOptions SoftwareOnly(bool inherit) {
  PerfOptions o;
  o.events = {"task-clock", "context-switches", "page-faults", "cpu-migrations"};
  o.inherit = inherit;
  return o;
}

bool HardwareCountable() {
  Result<PerfEventSpec> cycles = ParsePerfEvent("cycles");
  return cycles.ok() && ProbePerfGroup(std::span(&*cycles, 1), {}).ok();
}

constexpr double kMs = 1e6;  // task-clock is in ns

// Counting another process needs root (CAP_PERFMON) or perf_event_paranoid <= 1.
bool CanCountOthers(pid_t pid) {
  Result<PerfEventSpec> clock = ParsePerfEvent("task-clock");
  auto g = PerfEventGroup::Open(std::span(&*clock, 1), pid, {});
  return g.ok() || g.status().code() != ErrorCode::kPermissionDenied;
}

#define SKIP_UNLESS_ALLOWED(pid)                                                         \
  if (!CanCountOthers(pid)) {                                                            \
    MESSAGE("skipped: counting another process needs root or perf_event_paranoid <= 1"); \
    return;                                                                              \
  }

}  // namespace

TEST_CASE("perf: counts a real child, including threads it creates after attach (inherit)") {
  testing::BusyChild child;
  REQUIRE(child.ok());
  SKIP_UNLESS_ALLOWED(child.pid());
  PerfCollector perf(SoftwareOnly(/*inherit=*/true), "/proc");
  REQUIRE(perf.Open({child.pid(), ""}).ok());
  CHECK(perf.thread_count() == 1);

  // Window 1: only the main thread burns 60 ms of CPU.
  REQUIRE(perf.Begin().ok());
  child.BurnMain(60);
  auto w1 = perf.End();
  REQUIRE(w1.ok());
  auto v1 = ByName(*w1);
  CHECK(v1["perf:task-clock"] >= 55 * kMs);
  CHECK(v1["perf:task-clock"] < 200 * kMs);

  // Window 2: three threads created inside the window burn 40 ms each; the main thread
  // only waits. All of it must be counted: the threads did not exist at Open or Begin.
  REQUIRE(perf.Begin().ok());
  child.BurnInNewThreads(3, 40);
  auto w2 = perf.End();
  REQUIRE(w2.ok());
  auto v2 = ByName(*w2);
  CHECK(v2["perf:task-clock"] >= 3 * 38 * kMs);
  CHECK(v2["perf:context-switches"] >= 3);     // the main thread blocked in join, at least
  CHECK(v2.count("perf:running_ratio") == 0);  // no hardware group configured
  CHECK(perf.thread_count() == 1);             // inherited, not rescanned: no double count

  // Window 3: nothing runs; counters are deltas, so they are (close to) zero.
  REQUIRE(perf.Begin().ok());
  auto w3 = perf.End();
  REQUIRE(w3.ok());
  CHECK(ByName(*w3)["perf:task-clock"] < 5 * kMs);
  perf.Close();
}

TEST_CASE("perf: without inherit, Begin rescans /proc/PID/task for new threads") {
  testing::BusyChild child;
  REQUIRE(child.ok());
  SKIP_UNLESS_ALLOWED(child.pid());
  PerfCollector perf(SoftwareOnly(/*inherit=*/false), "/proc");
  REQUIRE(perf.Open({child.pid(), ""}).ok());
  CHECK(perf.thread_count() == 1);
  child.StartSleeper();  // a thread created after Open, alive across windows
  child.StartSleeper();
  REQUIRE(perf.Begin().ok());
  CHECK(perf.thread_count() == 3);
  child.BurnInSleepers(40);
  auto w = perf.End();
  REQUIRE(w.ok());
  CHECK(ByName(*w)["perf:task-clock"] >= 2 * 38 * kMs);
}

TEST_CASE("perf: a thread listing taken mid-way still attaches every existing thread") {
  testing::BusyChild child;
  REQUIRE(child.ok());
  SKIP_UNLESS_ALLOWED(child.pid());
  child.StartSleeper();
  child.StartSleeper();
  child.StartSleeper();
  PerfCollector perf(SoftwareOnly(/*inherit=*/true), "/proc");
  REQUIRE(perf.Open({child.pid(), ""}).ok());
  CHECK(perf.thread_count() == 4);
  REQUIRE(perf.Begin().ok());
  child.BurnInSleepers(30);
  auto w = perf.End();
  REQUIRE(w.ok());
  CHECK(ByName(*w)["perf:task-clock"] >= 3 * 28 * kMs);
}

TEST_CASE("perf: hardware events split into groups that the PMU schedules, rotated by visit") {
  if (!HardwareCountable()) {
    MESSAGE("skipped: this machine's PMU schedules no hardware counter (VM without vPMU)");
    return;
  }
  testing::BusyChild child;
  REQUIRE(child.ok());
  SKIP_UNLESS_ALLOWED(child.pid());
  PerfOptions o;
  o.pmu_trap_check = false;  // these test the grouping, on a PMU that may trap
  o.events = {"task-clock",    "cycles",           "instructions", "branch-instructions",
              "branch-misses", "cache-references", "cache-misses"};
  o.max_events_per_group = 2;
  PerfCollector perf(o, "/proc");
  REQUIRE(perf.Open({child.pid(), ""}).ok());
  REQUIRE(perf.group_count() == 3);
  CHECK(DescribeGroups(perf.hardware_groups()) ==
        "cycles, instructions; branch-instructions, branch-misses; "
        "cache-references, cache-misses");
  for (uint64_t visit = 0; visit < 6; ++visit) {
    REQUIRE(perf.SelectGroup(GroupForVisit(visit, perf.group_count())).ok());
    REQUIRE(perf.Begin().ok());
    child.BurnMain(20);
    auto w = perf.End();
    REQUIRE(w.ok());
    auto v = ByName(*w);
    CHECK(v["perf:task-clock"] >= 18 * kMs);  // software events ride along every visit
    CHECK(v["perf:running_ratio"] > 0.99);    // a group that fits is never multiplexed
    switch (visit % 3) {
      case 0:
        CHECK(v["perf:cycles"] > 1e6);
        CHECK(v["perf:instructions"] > 1e6);
        CHECK(v.count("perf:cache-misses") == 0);
        break;
      case 1:
        CHECK(v["perf:branch-instructions"] > 1e5);
        CHECK(v.count("perf:cycles") == 0);
        break;
      case 2:
        CHECK(v.count("perf:cache-references") == 1);
        break;
    }
  }
}

TEST_CASE("perf: counters shared with another perf user are multiplexed, scaled and reported") {
  if (!HardwareCountable()) {
    MESSAGE("skipped: this machine's PMU schedules no hardware counter (VM without vPMU)");
    return;
  }
  testing::BusyChild child;
  REQUIRE(child.ok());
  SKIP_UNLESS_ALLOWED(child.pid());
  PerfOptions o;
  o.pmu_trap_check = false;  // these test the grouping, on a PMU that may trap
  o.events = {"cycles", "instructions", "branch-instructions", "branch-misses"};
  PerfCollector perf(o, "/proc");
  REQUIRE(perf.Open({child.pid(), ""}).ok());
  REQUIRE(perf.group_count() == 1);
  REQUIRE(perf.Begin().ok());
  child.BurnMain(60);
  auto alone = perf.End();
  REQUIRE(alone.ok());
  auto a = ByName(*alone);
  CHECK(a["perf:running_ratio"] > 0.99);

  // Another tool counts the same thread with a group as large: the kernel rotates the two
  // groups (kernel/events/core.c perf_rotate_context), each runs part of the time.
  std::vector<PerfEventSpec> other;
  for (const char* n : {"cycles", "instructions", "cache-references", "cache-misses"}) {
    other.push_back(*ParsePerfEvent(n));
  }
  auto rival = PerfEventGroup::Open(other, child.pid(), {});
  REQUIRE(rival.ok());
  REQUIRE(rival->Enable().ok());
  REQUIRE(perf.Begin().ok());
  child.BurnMain(60);
  auto shared = perf.End();
  REQUIRE(shared.ok());
  auto b = ByName(*shared);
  MESSAGE("running ratio alone " << a["perf:running_ratio"] << ", shared "
                                 << b["perf:running_ratio"]);
  CHECK(b["perf:running_ratio"] < 0.95);
  CHECK(b["perf:running_ratio"] > 0.05);
  // Scaled to the whole window: the same work reads about the same.
  CHECK(b["perf:instructions"] > 0.5 * a["perf:instructions"]);
  CHECK(b["perf:instructions"] < 2.0 * a["perf:instructions"]);
}

TEST_CASE("perf: probing splits a group larger than the PMU's counters") {
  if (!HardwareCountable()) {
    MESSAGE("skipped: this machine's PMU schedules no hardware counter (VM without vPMU)");
    return;
  }
  PerfOptions o;
  o.pmu_trap_check = false;  // these test the grouping, on a PMU that may trap
  // More hardware events than any x86 PMU has general counters (AMD: 6, Intel: 4-8).
  o.events = {
      "cycles",           "instructions",          "branch-instructions", "branch-misses",
      "cache-references", "cache-misses",          "L1-dcache-loads",     "L1-dcache-load-misses",
      "L1-icache-loads",  "L1-icache-load-misses", "dTLB-loads",          "dTLB-load-misses"};
  PerfCollector perf(o, "/proc");
  REQUIRE(perf.Open({getpid(), ""}).ok());
  MESSAGE("groups: " << DescribeGroups(perf.hardware_groups()));
  CHECK(perf.group_count() >= 2);
  size_t measured = 0;
  for (const auto& g : perf.hardware_groups().groups) measured += g.size();
  CHECK(measured + perf.hardware_groups().rejected.size() == o.events.size());
}

TEST_CASE("perf: unknown events are named, a target that is gone or absent is a clear status") {
  testing::BusyChild child;
  REQUIRE(child.ok());
  SKIP_UNLESS_ALLOWED(child.pid());
  PerfOptions o;
  o.events = {"task-clock", "no-such-event"};
  PerfCollector perf(o, "/proc");
  REQUIRE(perf.Open({child.pid(), ""}).ok());
  CHECK(perf.warnings().find("unknown perf event 'no-such-event'") != std::string::npos);

  PerfOptions bad;
  bad.events = {"no-such-event"};
  PerfCollector none(bad, "/proc");
  Status s = none.Open({child.pid(), ""});
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("no-such-event") != std::string::npos);

  PerfCollector device_wide(SoftwareOnly(true), "/proc");
  CHECK(device_wide.Open({0, ""}).code() == ErrorCode::kUnsupported);

  testing::ScratchDir empty_proc;
  PerfCollector gone(SoftwareOnly(true), empty_proc.path());
  Status g = gone.Open({child.pid(), ""});
  CHECK(g.code() == ErrorCode::kNotFound);
  CHECK(g.message().find(empty_proc.path()) != std::string::npos);
}

TEST_CASE("perf: a target that exits after Open still yields its final counts") {
  auto child = std::make_unique<testing::BusyChild>();
  REQUIRE(child->ok());
  SKIP_UNLESS_ALLOWED(child->pid());
  PerfCollector perf(SoftwareOnly(true), "/proc");
  REQUIRE(perf.Open({child->pid(), ""}).ok());
  REQUIRE(perf.Begin().ok());
  child->BurnMain(30);
  child.reset();  // killed and reaped inside the window
  auto w = perf.End();
  REQUIRE(w.ok());
  CHECK(ByName(*w)["perf:task-clock"] >= 28 * kMs);
}

}  // namespace seqpoint::collectors

namespace seqpoint::collectors {

TEST_CASE("perf: events the iteration probes count are left out, and none left means absent") {
  testing::BusyChild child;
  REQUIRE(child.ok());
  SKIP_UNLESS_ALLOWED(child.pid());
  PerfCollector perf(SoftwareOnly(/*inherit=*/true), "/proc");
  perf.LeaveToProbes({"task-clock", "context-switches"});
  REQUIRE(perf.Open({child.pid(), ""}).ok());
  CHECK(perf.Describe().find("in the iteration probes: task-clock context-switches") !=
        std::string::npos);
  REQUIRE(perf.Begin().ok());
  child.BurnMain(5);
  auto w = perf.End();
  REQUIRE(w.ok());
  auto v = ByName(*w);
  CHECK(v.count("perf:task-clock") == 0);
  CHECK(v.count("perf:context-switches") == 0);
  CHECK(v.count("perf:page-faults") == 1);

  PerfCollector all_in_probes(SoftwareOnly(/*inherit=*/true), "/proc");
  all_in_probes.LeaveToProbes({"task-clock", "context-switches", "page-faults", "cpu-migrations"});
  Status s = all_in_probes.Open({child.pid(), ""});
  CHECK(s.code() == ErrorCode::kUnsupported);  // CollectorSet: absent, not failed
  CHECK(s.message().find("counted in the iteration probes") != std::string::npos);
}

}  // namespace seqpoint::collectors
