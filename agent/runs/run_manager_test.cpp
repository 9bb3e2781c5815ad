// RunManager driving collectors: counter groups rotate across a SeqPoint's repeat visits, so a
// collector whose events need several passes (PAPI event sets, perf past the PMU's counters)
// gets every group measured. Fed by the recorded trainer trace (tests/data/agent); the
// collector is a stand-in with three groups, because this VM has no PMU to need them.
#include "agent/runs/run_manager.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>

#include "agent/testing/test_harness.h"
#include "agent/testing/test_util.h"
#include "common/trace_csv.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using seqpoint::collectors::Collector;

namespace {

// Reports one event per group, named after the group it held: "grouped:g<k>".
class ThreeGroupCollector : public seqpoint::collectors::Collector {
 public:
  explicit ThreeGroupCollector(std::map<size_t, int>* held) : held_(held) {}
  std::string_view name() const override { return "grouped"; }
  seqpoint::Status Open(const seqpoint::collectors::Target&) override {
    return seqpoint::Status::Ok();
  }
  seqpoint::Status Begin() override { return seqpoint::Status::Ok(); }
  seqpoint::Result<std::vector<seqpoint::collectors::Sample>> End() override {
    ++(*held_)[group_];
    return std::vector<seqpoint::collectors::Sample>{
        {"grouped:g" + std::to_string(group_), 1, "count"}};
  }
  void Close() override {}
  size_t group_count() const override { return 3; }
  seqpoint::Status SelectGroup(size_t g) override {
    group_ = g;
    return seqpoint::Status::Ok();
  }
  size_t current_group() const override { return group_; }

 private:
  std::map<size_t, int>* held_;
  size_t group_ = 0;
};

// Runs grouped by process, a count budget each.
RunManagerOptions ByPid(uint64_t budget) {
  RunManagerOptions o;
  o.group_by = *ParseRunGroupBy("pid");
  o.selector.budget_count = budget;
  return o;
}

}  // namespace

TEST_CASE("agent run manager: a collector's counter groups rotate over each SeqPoint's visits") {
  TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  RunManagerOptions o = ByPid(96);
  std::map<size_t, int> held;
  RunManager runs(
      store->get(),
      [&] {
        std::vector<std::unique_ptr<seqpoint::collectors::Collector>> v;
        v.push_back(std::make_unique<ThreeGroupCollector>(&held));
        return v;
      },
      o);
  auto trace = seqpoint::LoadTrace(RecordedTrace());
  REQUIRE(trace.ok());
  const seqpoint::Trace& t = *trace;
  const int time = t.MetricIndex("time_ns");
  const pid_t pid = 4343;
  runs.OnProcessFound(ProcessInfo{pid, 1, "replay", "groups-test"});
  uint64_t clock = 1'000'000;
  for (size_t r = 0; r < t.rows(); ++r) {
    const uint64_t tokens = static_cast<uint64_t>(t.tokens[r]);
    const uint64_t end = clock + static_cast<uint64_t>(t.metrics[time][r]);
    runs.OnIterationBegin({pid, pid, t.iter[r], t.seq_len[r], t.batch[r], tokens, clock});
    runs.OnIterationEnd({pid, pid, t.iter[r], t.seq_len[r], t.batch[r], tokens, clock, end, true});
    clock = end + 1000;
  }
  MESSAGE("measurements per group: g0 " << held[0] << ", g1 " << held[1] << ", g2 " << held[2]);
  REQUIRE(held.size() == 3);
  const int total = held[0] + held[1] + held[2];
  for (size_t g = 0; g < 3; ++g) CHECK(held[g] * 6 >= total);  // none starved (a third each)
  RunTracker* tracker = runs.FindActive("groups-test");
  REQUIRE(tracker != nullptr);
  RunSnapshot s = tracker->Snapshot();
  for (const char* metric : {"grouped:g0", "grouped:g1", "grouped:g2"}) {
    bool found = false;
    for (const Projection& p : s.projections) found = found || p.metric == metric;
    CHECK_MESSAGE(found, metric << " has no projection");
  }
}

// Issue 19: processes of one run found gone from /proc together, with no source to tell when
// each ended (none here; the eBPF source reads the kernel's exit records first): they are ended,
// and the log says their order is not known rather than implying one.
TEST_CASE("agent run manager: processes found gone with no exit reported: their order is unknown") {
  TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  RunManagerOptions o = ByPid(50);
  o.proc_root = dir.path();  // no process lives here: every one is gone
  RunManager runs(
      store->get(), [] { return std::vector<std::unique_ptr<Collector>>{}; }, o);
  runs.OnProcessFound(ProcessInfo{101, 5, "rank0", "order-test"});
  runs.OnProcessFound(ProcessInfo{102, 6, "rank1", "order-test"});
  REQUIRE(runs.processes() == 2);
  // The daemon logs to stderr: read it from a file for the call.
  const std::string log = dir.File("stderr.log");
  fflush(stderr);
  const int saved = dup(2);
  FILE* f = std::fopen(log.c_str(), "w");
  REQUIRE(f != nullptr);
  dup2(fileno(f), 2);
  runs.CloseIdleRuns();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::fclose(f);
  const std::string text = ReadFile(log);
  CHECK(runs.processes() == 0);
  CHECK(runs.runs_closed() == 1);
  CHECK_MESSAGE(text.find("pids 101, 102 were found gone from /proc with no exit reported: the "
                          "order in which they ended is not known") != std::string::npos,
                text);
}
