// The loop latency: percentiles within a bucket of the truth, the two populations apart (loop
// latency for the records that wake the daemon, batch delay for the batched ones), every event
// forwarded unchanged, nothing timed for a source whose clock is not ours or for a record
// stamped before the daemon started, and the same figures on /metrics.
#include "agent/daemon/loop_latency.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

namespace seqpoint::daemon {
namespace {

double Sample(const std::vector<MetricFamily>& families, const std::string& name,
              const std::string& stat = "") {
  for (const MetricFamily& f : families) {
    if (f.name != name) continue;
    for (const MetricSample& s : f.samples) {
      if (stat.empty() ? s.labels.empty() : (s.labels.size() == 1 && s.labels[0].second == stat))
        return s.value;
    }
  }
  FAIL("no sample " << name << " " << stat);
  return 0;
}

struct Recorder : IterationSink {
  int found = 0, begins = 0, ends = 0, counters = 0, exits = 0, libs = 0, arrivals = 0;
  void OnProcessFound(const ProcessInfo&) override { ++found; }
  void OnIterationBegin(const IterationBegin&) override { ++begins; }
  void OnIterationEnd(const IterationEnd&) override { ++ends; }
  void OnIterationCounters(const IterationCounters&) override { ++counters; }
  void OnProcessExit(const ProcessExit&) override { ++exits; }
  void OnLibrariesChanged(pid_t) override { ++libs; }
  void OnCollectiveArrival(uint32_t, uint64_t) override { ++arrivals; }
};

TEST_CASE("quantiles are the bucket's upper edge: at most 1/16 above the value") {
  LatencyHistogram h;
  CHECK(h.Quantile(0.5) == 0);
  CHECK(h.Json()["p99_us"].is_null());
  for (int64_t us = 1; us <= 1000; ++us) h.Record(us * 1000);  // 1 µs .. 1 ms, uniform
  CHECK(h.count() == 1000);
  CHECK(h.max_ns() == 1'000'000);
  const int64_t p50 = h.Quantile(0.5), p99 = h.Quantile(0.99);
  CHECK(p50 >= 500'000);
  CHECK(p50 <= 500'000 * 17 / 16);
  CHECK(p99 >= 990'000);
  CHECK(p99 <= 1'000'000);  // never above the largest value seen
  CHECK(h.Quantile(1.0) == 1'000'000);
  h.Record(-5);                // a reading before its stamp: clamped into the first bucket
  h.Record(int64_t{1} << 62);  // far past the last octave: the open-ended bucket
  CHECK(h.Quantile(1.0) == int64_t{1} << 62);
}

TEST_CASE("woken events and batched ends are timed apart, and every event is forwarded") {
  Recorder r;
  int64_t now = 1'000'000;
  LoopLatencySink s(&r, true, [&now] { return now; });
  now = 1'000'000'000;  // the daemon has run a second: every stamp below is after its start
  s.OnProcessFound({});
  IterationBegin b;
  b.begin_ns = now - 50'000;  // 50 µs old when handled
  s.OnIterationBegin(b);
  IterationEnd hooked;
  hooked.begin_reported = true;
  hooked.end_ns = now - 150'000;
  s.OnIterationEnd(hooked);
  IterationEnd batched;
  batched.end_ns = now - 400'000'000;  // waited for the poll timer
  for (uint64_t i = 0; i < 2 * LoopLatencySink::kBatchedSample; ++i) s.OnIterationEnd(batched);
  IterationEnd future;
  future.begin_reported = true;
  future.end_ns = now + 1;  // not our clock: counted apart, not timed
  s.OnIterationEnd(future);
  s.OnIterationCounters({});
  s.OnProcessExit({});
  s.OnLibrariesChanged(1);
  s.OnCollectiveArrival(1, 2);
  CHECK(r.found == 1);
  CHECK(r.begins == 1);
  CHECK(r.ends == 2 + 2 * static_cast<int>(LoopLatencySink::kBatchedSample));
  CHECK(r.counters == 1);
  CHECK(r.exits == 1);
  CHECK(r.libs == 1);
  CHECK(r.arrivals == 1);
  CHECK(s.woken().count() == 2);
  CHECK(s.woken().max_ns() == 150'000);
  CHECK(s.batched().count() == 2);  // one in kBatchedSample
  CHECK(s.batched().max_ns() == 400'000'000);
  nlohmann::json j = s.Json();
  CHECK(j["measured"] == true);
  CHECK(j["clock_skew"] == 1);
  CHECK(j["woken"]["count"] == 2);
  CHECK(j["woken"]["max_us"] == doctest::Approx(150.0));
  // /metrics: the same two figures, apart; the batched records' age is never loop latency.
  auto f = s.Families();
  CHECK(Sample(f, "seqpoint_agent_loop_latency_events_total") == 2);
  CHECK(Sample(f, "seqpoint_agent_loop_latency_seconds", "max") == doctest::Approx(150e-6));
  CHECK(Sample(f, "seqpoint_agent_loop_latency_seconds", "p99") ==
        doctest::Approx(150e-6));  // never above the max
  CHECK(Sample(f, "seqpoint_agent_loop_latency_seconds", "p50") >= 50e-6);
  CHECK(Sample(f, "seqpoint_agent_loop_latency_seconds", "p50") <= 50e-6 * 17 / 16);
  CHECK(Sample(f, "seqpoint_agent_batch_delay_events_total") == 2);
  CHECK(Sample(f, "seqpoint_agent_batch_delay_seconds", "max") == doctest::Approx(0.4));
  size_t series = 0;
  for (const MetricFamily& fam : f) series += fam.samples.size();
  CHECK(series == 8);  // bounded: no pid, run or SL label
}

TEST_CASE("records stamped before the daemon started wait for it, not for its loop: not timed") {
  Recorder r;
  int64_t now = 5'000'000'000;  // the daemon starts at 5 s
  LoopLatencySink s(&r, true, [&now] { return now; });
  now += 1'000'000;
  IterationEnd old;  // a pinned ring's backlog from before the restart, delivered at catch-up
  old.begin_reported = true;
  old.end_ns = 4'000'000'000;
  s.OnIterationEnd(old);
  IterationEnd old_batched;
  old_batched.end_ns = 4'000'000'000;
  s.OnIterationEnd(old_batched);  // the first batched record is the sampled one
  IterationBegin fresh;
  fresh.begin_ns = now - 20'000;
  s.OnIterationBegin(fresh);
  CHECK(r.ends == 2);
  CHECK(r.begins == 1);
  CHECK(s.before_start() == 2);
  CHECK(s.woken().count() == 1);
  CHECK(s.woken().max_ns() == 20'000);
  CHECK(s.batched().count() == 0);
  CHECK(s.Json()["before_start"] == 2);
}

TEST_CASE("a replay's timestamps are not timed, and the status says why") {
  Recorder r;
  LoopLatencySink s(&r, false, [] { return int64_t{1}; });
  IterationEnd e;
  e.begin_reported = true;
  e.end_ns = 5;
  s.OnIterationEnd(e);
  CHECK(r.ends == 1);
  CHECK(s.woken().count() == 0);
  CHECK(s.Json()["measured"] == false);
  // /metrics still has the families (their shape is the contract), with no value to stand
  // behind: NaN, as a Prometheus summary with no observation, and none timed.
  auto f = s.Families();
  CHECK(std::isnan(Sample(f, "seqpoint_agent_loop_latency_seconds", "p50")));
  CHECK(std::isnan(Sample(f, "seqpoint_agent_batch_delay_seconds", "max")));
  CHECK(Sample(f, "seqpoint_agent_loop_latency_events_total") == 0);
}

}  // namespace
}  // namespace seqpoint::daemon
