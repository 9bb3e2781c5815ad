// A projection seqpointd cannot stand behind is flagged and left out, with its reason, live and
// after the run is stored (docs/estimators.md, "Projections left out").
#include <doctest/doctest.h>

#include <string>

#include "agent/runs/run_tracker.h"
#include "agent/store/store.h"
#include "common/testing/scratch_dir.h"
#include "selector/estimate/recorded_live_runs.h"
#include "selector/estimate/whole_run_estimator.h"

using namespace seqpoint::daemon;

namespace {

// The recorded libtorch run (selector/estimate/recorded_live_runs.h) through a tracker; every
// iteration it measures (controls too) runs `slow` times longer than recorded: an effect of
// measuring that the control pairs cannot see, so only the time self-check can.
std::unique_ptr<RunTracker> Replay(double slow) {
  RunRecord rec;
  rec.id = 1;
  rec.key = "k";
  seqpoint::selector::OnlineOptions o;
  o.per_doubling = 16;
  auto t = RunTracker::Create(rec, o);
  REQUIRE(t.ok());
  const auto& r = seqpoint::selector::testing::Libtorch2();
  uint64_t clock = 1'000'000;
  for (uint64_t i = 0; i < r.seq_len.size(); ++i) {
    auto d = (*t)->Decide(42, i, r.seq_len[i], 0, 0);
    std::vector<seqpoint::collectors::Sample> values;
    double us = r.time_us[i];
    if (d.measure) {
      us *= slow;
      values.push_back({"cpu_ns", 1e3 * r.cpu_us[i], "ns"});
    }
    const auto dt = static_cast<uint64_t>(1e3 * us);
    (*t)->Complete(42, i, r.seq_len[i], 0, 0, clock, clock + dt, values);
    clock += dt + 1000;
  }
  return std::move(*t);
}

const Projection* Find(const RunSnapshot& s, const std::string& metric) {
  for (const Projection& p : s.projections) {
    if (p.metric == metric) return &p;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("agent run tracker: a time projection that misses its own measured total is left out") {
  const RunSnapshot ok = Replay(1.0)->Snapshot();
  REQUIRE(Find(ok, "time_ns") != nullptr);
  CHECK(Find(ok, "time_ns")->left_out.empty());

  auto tracker = Replay(1.8);
  const RunSnapshot s = tracker->Snapshot();
  const Projection* time = Find(s, "time_ns");
  REQUIRE(time != nullptr);
  CHECK(time->left_out == seqpoint::selector::kUnreliableSelfCheck);
  CHECK(time->left_out_detail.find("self-check missed") != std::string::npos);
  // The counter is projected through every iteration's time: it stands.
  REQUIRE(Find(s, "cpu_ns") != nullptr);
  CHECK(Find(s, "cpu_ns")->left_out.empty());

  // Stored and read back (a closed run's `show`): still left out, with its reason.
  seqpoint::testing::ScratchDir dir;
  auto store = Store::Open(dir.path() + "/state.db");
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateRun(s.run).ok());
  REQUIRE((*store)->SaveRun(s, {}, {}).ok());
  auto back = (*store)->LoadRun(s.run.id);
  REQUIRE(back.ok());
  const Projection* stored = Find(*back, "time_ns");
  REQUIRE(stored != nullptr);
  CHECK(stored->left_out == time->left_out);
  CHECK(stored->left_out_detail == time->left_out_detail);
  CHECK(Find(*back, "cpu_ns")->left_out.empty());
}
