// The context-switch probe on this machine's real PMU (or its absence), and the verdict rule.
// Whether this machine traps is not asserted: it is what the probe is for. CI's VM does.
#include "collectors/perf/pmu_trap_probe.h"

#include <doctest/doctest.h>

#include <string>

#include "collectors/perf/perf_collector.h"

using namespace seqpoint;
using namespace seqpoint::collectors;

TEST_CASE("pmu trap probe: the verdict needs both twice the cost and 2 us more") {
  CHECK(ContextSwitchesTrap({3000, 25000}));    // a trapping VM: 3 us -> 25 us
  CHECK(!ContextSwitchesTrap({3000, 3400}));    // bare metal: a few hundred ns more
  CHECK(!ContextSwitchesTrap({800, 2000}));     // 2.5x but only 1.2 us: small-noise territory
  CHECK(!ContextSwitchesTrap({20000, 25000}));  // 5 us more but only 1.25x: a slow machine
}

TEST_CASE("pmu trap probe: measures a real context switch with and without cycles counted") {
  auto cycles = ParsePerfEvent("cycles");
  REQUIRE(cycles.ok());
  std::vector<PerfEventSpec> group = {*cycles};
  Result<ContextSwitchCost> cost = MeasureContextSwitchCost(group, PerfOpenOptions{});
  if (!cost.ok()) {
    MESSAGE("no verdict here: " << cost.status().message());
    CHECK(!cost.status().message().empty());
    return;
  }
  MESSAGE("context switch " << cost->plain_ns << " ns plain, " << cost->counted_ns
                            << " ns with cycles counted: "
                            << std::string(ContextSwitchesTrap(*cost) ? "traps" : "does not trap"));
  CHECK(cost->plain_ns > 0);
  CHECK(cost->counted_ns > 0);
}

TEST_CASE("pmu trap probe: a trapping PMU leaves the collector with software events, said why") {
  auto cycles = ParsePerfEvent("cycles");
  REQUIRE(cycles.ok());
  std::vector<PerfEventSpec> group = {*cycles};
  Result<ContextSwitchCost> cost = MeasureContextSwitchCost(group, PerfOpenOptions{});
  const bool traps = cost.ok() && ContextSwitchesTrap(*cost);
  PerfOptions options;
  options.events = {"task-clock", "cycles", "instructions"};
  PerfCollector perf(options, "/proc");
  REQUIRE(perf.Open(Target{getpid(), ""}).ok());
  MESSAGE(perf.Describe() << " | " << perf.warnings());
  if (traps) {
    CHECK(perf.hardware_groups().groups.empty());
    CHECK(perf.warnings().find("pmu_trap_check") != std::string::npos);
  }
  options.pmu_trap_check = false;  // the operator keeps them anyway
  PerfCollector kept(options, "/proc");
  REQUIRE(kept.Open(Target{getpid(), ""}).ok());
  CHECK(kept.warnings().find("pmu_trap_check") == std::string::npos);
}
