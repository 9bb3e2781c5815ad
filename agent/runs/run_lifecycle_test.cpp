// RunManager's process lifecycle and resume, against a real store:
//  - runs come only from announced processes: an event of a pid never announced creates no run
//    (counted and dropped);
//  - a pid reused by a new process (another start time) ends the old process's run and starts
//    the new one's; the same pid and start time announced again (an exec) changes nothing;
//  - a run that cannot be restored (a truncated checkpoint) is set aside, counted, and the
//    other runs resume.
#include <doctest/doctest.h>
#include <unistd.h>

#include <memory>

#include "agent/runs/run_manager.h"
#include "agent/testing/test_util.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;

namespace {

RunManagerOptions Options() {
  RunManagerOptions o;
  o.group_by = *ParseRunGroupBy("pid");
  o.selector.budget_count = 8;
  return o;
}

void Iterations(RunManager& runs, pid_t pid, uint64_t first, uint64_t n, uint64_t* clock) {
  for (uint64_t i = first; i < first + n; ++i) {
    runs.OnIterationBegin({pid, pid, i, 16, 1, 16, *clock});
    runs.OnIterationEnd({pid, pid, i, 16, 1, 16, *clock, *clock + 1'000'000, true});
    *clock += 2'000'000;
  }
}

}  // namespace

TEST_CASE("run lifecycle: events of a pid never announced create no run, and are counted") {
  TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  RunManager runs(store->get(), nullptr, Options());
  uint64_t clock = 1'000'000'000;
  Iterations(runs, 4401, 0, 5, &clock);  // a late record of a process already gone
  runs.OnIterationCounters({4401, 5, {}, 0});
  CHECK(runs.runs().empty());
  CHECK(runs.processes() == 0);
  CHECK(runs.unannounced_events() == 11);  // 5 begins, 5 ends, 1 counters record
}

TEST_CASE("run lifecycle: a reused pid ends the old process's run, an exec changes nothing") {
  TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  RunManager runs(store->get(), nullptr, Options());
  uint64_t clock = 1'000'000'000;
  runs.OnProcessFound(ProcessInfo{4402, 100, "first", "job-a"});
  Iterations(runs, 4402, 0, 20, &clock);
  // The same process announced again (it called exec: same pid, same start time): same run.
  runs.OnProcessFound(ProcessInfo{4402, 100, "first", "job-a"});
  Iterations(runs, 4402, 0, 10, &clock);  // the new image numbers from 0 again
  REQUIRE(runs.FindActive("job-a") != nullptr);
  CHECK(runs.FindActive("job-a")->record().iterations == 30);
  CHECK(runs.runs_closed() == 0);
  // The pid now belongs to another process (start time 900): job-a's process ended unseen.
  runs.OnProcessFound(ProcessInfo{4402, 900, "second", "job-b"});
  CHECK(runs.FindActive("job-a") == nullptr);
  CHECK(runs.runs_closed() == 1);
  Iterations(runs, 4402, 0, 7, &clock);
  RunTracker* b = runs.FindActive("job-b");
  REQUIRE(b != nullptr);
  CHECK(b->record().iterations == 7);
  CHECK(runs.processes() == 1);
}

TEST_CASE("run lifecycle: a run that cannot be restored is set aside, the others resume") {
  TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE(store.ok());
  int64_t good = 0, bad = 0;
  {
    RunManager runs(store->get(), nullptr, Options());
    uint64_t clock = 1'000'000'000;
    // getpid(): a process that exists, so the resumed run stays open.
    runs.OnProcessFound(ProcessInfo{getpid(), 0, "self", "job-good"});
    runs.OnProcessFound(ProcessInfo{4403, 0, "other", "job-bad"});
    Iterations(runs, getpid(), 0, 30, &clock);
    Iterations(runs, 4403, 0, 30, &clock);
    good = runs.FindActive("job-good")->record().id;
    bad = runs.FindActive("job-bad")->record().id;
    REQUIRE(runs.Flush().ok());
    // A checkpoint cut short (a crash mid-write on a disk that lies, or a format this build
    // does not read): the stored run can no longer be restored.
    RunTracker* t = runs.FindActive("job-bad");
    const std::string image = t->Checkpoint();
    const std::string cut = image.substr(0, image.size() / 2);
    RunSnapshot snap = t->Snapshot();
    REQUIRE((*store)->SaveRun(snap, {}, {}, {}, &cut).ok());
  }
  RunManager again(store->get(), nullptr, Options());
  REQUIRE(again.Resume().ok());  // the daemon starts
  CHECK(again.runs_set_aside() == 1);
  REQUIRE(again.set_aside().size() == 1);
  CHECK(again.set_aside()[0].id == bad);
  CHECK(again.set_aside()[0].key == "job-bad");
  CHECK(again.set_aside()[0].reason.find("run " + std::to_string(bad)) != std::string::npos);
  REQUIRE(again.FindActive("job-good") != nullptr);
  CHECK(again.FindActive("job-good")->record().id == good);
  CHECK(again.FindActive("job-good")->record().iterations == 30);
  CHECK(again.FindActive("job-bad") == nullptr);
  // Its stored totals stay readable; later starts no longer try it.
  auto stored = (*store)->LoadRun(bad);
  REQUIRE(stored.ok());
  CHECK(stored->run.iterations == 30);
  CHECK(stored->run.state == RunState::kSetAside);
  RunManager third(store->get(), nullptr, Options());
  REQUIRE(third.Resume().ok());
  CHECK(third.runs_set_aside() == 0);
  CHECK(third.FindActive("job-good") != nullptr);
}
