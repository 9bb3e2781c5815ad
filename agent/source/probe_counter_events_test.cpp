// The probe counter path as the daemon configures and reports it: which perf events the probes
// count, why none when the config leaves them none (what `seqpoint status` says), the deltas of
// an end record as samples, and the /metrics families that make the path and its left-out
// windows visible. Pure functions and a stub source: no kernel needed.
#include "agent/source/probe_counter_events.h"

#include <doctest/doctest.h>

#include <string>

#include "agent/source/source_metrics.h"

namespace seqpoint::daemon {
namespace {

const MetricFamily* Find(const std::vector<MetricFamily>& fams, const std::string& name) {
  for (const MetricFamily& f : fams) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

double Sample(const MetricFamily& f, const std::string& label, const std::string& value) {
  for (const MetricSample& s : f.samples) {
    for (const auto& [k, v] : s.labels) {
      if (k == label && v == value) return s.value;
    }
  }
  return -1;
}

class StubSource : public IterationSource {
 public:
  explicit StubSource(ProbeCounterPathStats c) { stats_.counters = std::move(c); }
  std::string_view name() const override { return "stub"; }
  Status Start(IterationSink*) override { return Status::Ok(); }
  void Stop() override {}
  void SetBeginHooks(pid_t, bool) override {}
  SourceStats stats() const override { return stats_; }

 private:
  SourceStats stats_;
};

TEST_CASE("probe counter events: the default perf events give the probes four to count") {
  collectors::PerfOptions perf;
  auto events = ProbeCounterEventsFor(perf);
  REQUIRE(events.size() == SP_MAX_COUNTERS);
  CHECK(events[0].name == "task-clock");
  CHECK(events[0].unit == "ns");
  CHECK(ProbeCountersConfigWhyNot(perf).empty());
}

TEST_CASE("probe counter events: a config that leaves the probes nothing says why") {
  collectors::PerfOptions perf;
  perf.in_probe = false;
  CHECK(ProbeCounterEventsFor(perf).empty());
  CHECK(ProbeCountersConfigWhyNot(perf) == "collectors.perf.in_probe is off");
  perf = {};
  perf.enabled = false;
  CHECK(ProbeCountersConfigWhyNot(perf) == "collectors.perf is off");
  perf = {};
  perf.exclude_kernel = true;
  CHECK(ProbeCounterEventsFor(perf).empty());
  CHECK(ProbeCountersConfigWhyNot(perf).find("exclude_kernel") != std::string::npos);
  perf = {};
  perf.events = {"cycles", "instructions"};  // hardware only: the user-space collector's
  CHECK(ProbeCounterEventsFor(perf).empty());
  CHECK(ProbeCountersConfigWhyNot(perf).find("no software event") != std::string::npos);
}

TEST_CASE("probe counter events: a counter the probes left out is not a sample") {
  const std::vector<probes::ProbeCounterEvent> events = ProbeCounterEventsFor({});
  probes::IterationEvent end;
  end.pid = 42;
  end.iter = 7;
  end.counters = {1'000'000, 3, 9, 0};
  end.counter_mask = 0b0110;  // task-clock left out (too much steal), migrations not armed
  end.counter_flags = SP_COUNTERS_STOLEN;
  IterationCounters c = CountersOf(end, events);
  CHECK(c.pid == 42);
  CHECK(c.iter == 7);
  CHECK(c.flags == SP_COUNTERS_STOLEN);
  REQUIRE(c.values.size() == 2);
  CHECK(c.values[0].name == "perf:page-faults");
  CHECK(c.values[0].value == 3);
  CHECK(c.values[1].name == "perf:context-switches");
}

TEST_CASE("probe counter events: /metrics says which counter path is in force and its outcomes") {
  ProbeCounterPathStats c;
  c.path = "in-kernel sched_switch counting";
  c.windows = 100;
  c.flagged = 7;
  c.implausible = 1;
  c.steal_subtracted = 5;
  c.steal_flagged = 2;
  StubSource src(c);
  auto fams = SourceFamilies(&src);
  const MetricFamily* path = Find(fams, "seqpoint_probe_counting_path");
  REQUIRE(path != nullptr);
  CHECK(Sample(*path, "path", "kernel") == 1);
  CHECK(Sample(*path, "path", "user") == 0);
  CHECK(Sample(*path, "path", "none") == 0);
  const MetricFamily* windows = Find(fams, "seqpoint_probe_counting_windows_total");
  REQUIRE(windows != nullptr);
  CHECK(windows->type == "counter");
  CHECK(Sample(*windows, "outcome", "read") == 100);
  CHECK(Sample(*windows, "outcome", "flagged") == 7);
  CHECK(Sample(*windows, "outcome", "implausible") == 1);
  CHECK(Sample(*windows, "outcome", "steal_subtracted") == 5);
  CHECK(Sample(*windows, "outcome", "steal_flagged") == 2);

  c.path = "user-space perf collector";
  c.why = "this kernel cannot run raw tracepoint BPF programs (Linux 4.17+)";
  StubSource user(c);
  const auto user_fams = SourceFamilies(&user);
  const MetricFamily* p2 = Find(user_fams, "seqpoint_probe_counting_path");
  REQUIRE(p2 != nullptr);
  CHECK(Sample(*p2, "path", "user") == 1);
  CHECK(Sample(*p2, "path", "kernel") == 0);
}

TEST_CASE("probe counter events: /metrics says where hypervisor steal is read") {
  ProbeCounterPathStats c;
  c.path = "in-kernel sched_switch counting";
  c.steal_source = "kvm_steal_time";
  c.steal_stale = 4;
  StubSource src(c);
  auto fams = SourceFamilies(&src);
  const MetricFamily* steal = Find(fams, "seqpoint_probe_steal_source");
  REQUIRE(steal != nullptr);
  CHECK(steal->type == "gauge");
  CHECK(Sample(*steal, "source", "kvm_steal_time") == 1);
  CHECK(Sample(*steal, "source", "run_queue") == 0);
  CHECK(Sample(*steal, "source", "none") == 0);
  const MetricFamily* windows = Find(fams, "seqpoint_probe_counting_windows_total");
  REQUIRE(windows != nullptr);
  CHECK(Sample(*windows, "outcome", "steal_stale") == 4);
  // The user-space path reads no steal: every source 0.
  c.path = "user-space perf collector";
  c.steal_source.clear();
  StubSource user(c);
  const auto user_fams = SourceFamilies(&user);
  const MetricFamily* s2 = Find(user_fams, "seqpoint_probe_steal_source");
  REQUIRE(s2 != nullptr);
  for (const char* src_name : {"kvm_steal_time", "run_queue", "none"}) {
    CHECK(Sample(*s2, "source", src_name) == 0);
  }
}

}  // namespace
}  // namespace seqpoint::daemon
