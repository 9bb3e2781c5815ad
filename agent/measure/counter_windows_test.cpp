// CounterWindows: the user-space collectors' start offsets and the probe windows, as exported.
#include "agent/measure/counter_windows.h"

#include <doctest/doctest.h>

namespace seqpoint::daemon {
namespace {

double Sample(const std::vector<MetricFamily>& families, const std::string& name,
              const std::string& label, const std::string& value) {
  for (const MetricFamily& f : families) {
    if (f.name != name) continue;
    for (const MetricSample& s : f.samples) {
      for (const auto& [k, v] : s.labels) {
        if (k == label && v == value) return s.value;
      }
    }
  }
  return -1;
}

TEST_CASE(
    "counter windows: offsets from the begin probe in log2 buckets, and probe windows counted") {
  CounterWindows w;
  CHECK(w.OffsetQuantileNs(0.5) == 0);  // none yet
  for (uint64_t us : {20, 30, 40, 50, 300}) w.UserSpaceStart(1'000'000, 1'000'000 + us * 1000);
  w.UserSpaceStart(0, 5);              // begin not seen: not an offset
  w.UserSpaceStart(2'000'000, 1'000);  // another clock (a replay): ignored
  CHECK(w.user_space_windows() == 5);
  CHECK(w.OffsetQuantileNs(0.5) == 65535);    // 40 us is in [32768, 65536)
  CHECK(w.OffsetQuantileNs(1.0) == 300'000);  // the maximum itself
  std::vector<collectors::Sample> values{{"time_ns", 1, "ns"}};
  w.TakeProbeCounters({1, 7, {{"perf:task-clock", 2e6, "ns"}}, 0}, &values);
  w.TakeProbeCounters({1, 8, {{"perf:task-clock", 2e6, "ns"}}, 1u}, &values);
  w.TakeProbeCounters({1, 9, {}, 0}, &values);  // no counters: not a probe window
  CHECK(values.size() == 3);
  CHECK(values[1].name == "perf:task-clock");
  auto f = w.Families();
  CHECK(Sample(f, "seqpoint_collector_windows_total", "where", "probe") == 2);
  CHECK(Sample(f, "seqpoint_collector_windows_total", "where", "probe_flagged") == 1);
  CHECK(Sample(f, "seqpoint_collector_windows_total", "where", "user_space") == 5);
  CHECK(w.probe_flagged() == 1);
  CHECK(Sample(f, "seqpoint_collector_start_offset_seconds", "stat", "max") ==
        doctest::Approx(300e-6));
}

// Why the probes left a window's counters out, by flag: a window with every counter left out
// (no values, flags only) is counted too, each of its reasons once.
TEST_CASE("counter windows: flagged probe windows counted by reason") {
  CounterWindows w;
  std::vector<collectors::Sample> values;
  w.TakeProbeCounters({1, 1, {}, 2u}, &values);       // uncounted_thread, nothing kept
  w.TakeProbeCounters({1, 2, {}, 2u | 4u}, &values);  // and read_failed
  w.TakeProbeCounters({1, 3, {{"perf:task-clock", 1e6, "ns"}}, 1u}, &values);  // others_running
  w.TakeProbeCounters({1, 4, {}, 32u | 16u | 8u}, &values);  // stolen, exec, implausible
  w.TakeProbeCounters({1, 5, {{"perf:task-clock", 1e6, "ns"}}, 0}, &values);  // not flagged
  CHECK(w.probe_windows() == 5);
  CHECK(w.probe_flagged() == 4);
  auto f = w.Families();
  const char* name = "seqpoint_probe_flagged_windows_total";
  CHECK(Sample(f, name, "reason", "others_running") == 1);
  CHECK(Sample(f, name, "reason", "uncounted_thread") == 2);
  CHECK(Sample(f, name, "reason", "read_failed") == 1);
  CHECK(Sample(f, name, "reason", "implausible") == 1);
  CHECK(Sample(f, name, "reason", "exec") == 1);
  CHECK(Sample(f, name, "reason", "stolen") == 1);
}

}  // namespace
}  // namespace seqpoint::daemon
