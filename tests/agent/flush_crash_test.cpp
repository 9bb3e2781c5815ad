// Exactly once across crashes (docs/failure-modes.md): a flush saves every run in one
// transaction (Store::SaveRuns), and the source lets go of what it delivered only once that
// transaction committed (Daemon::FlushState -> IterationSource::OnStateSaved), so after a
// crash anywhere in a flush the restarted daemon is given again exactly what the database
// lacks. Here the crash is real: a child process runs the flush and _exit()s just before its
// k-th SQL statement (the fault seam at the store, SqliteDb::set_fault_hook), for every k of
// the flush; the parent then resumes from the database, as a restarted daemon does, is given
// again every record the source never let go, and counts each run's iterations: none twice,
// none lost. Also the same with each statement failing (no crash): the next flush saves all.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "agent/runs/run_manager.h"
#include "agent/testing/test_util.h"
#include "common/trace_csv.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;

namespace {

// The two trainers: this test process and its parent (alive while the test runs, so a resume
// keeps their runs open), as the test process itself sees them (not as its children do).
const pid_t kTrainerA = getpid();
const pid_t kTrainerB = getppid();

// Two runs ("a" and "b", one process each), fed rows [from, to) of the recorded trace, as the
// source delivers them.
struct Feeder {
  const seqpoint::Trace& trace;
  RunManager& runs;
  uint64_t clock = 1'000'000;

  void Found() {
    runs.OnProcessFound(ProcessInfo{kTrainerA, 1, "trainer-a", "a"});
    runs.OnProcessFound(ProcessInfo{kTrainerB, 1, "trainer-b", "b"});
  }
  void Rows(size_t from, size_t to) {
    const int time = trace.MetricIndex("time_ns");
    for (size_t r = from; r < to; ++r) {
      for (pid_t pid : {kTrainerA, kTrainerB}) {
        const uint64_t tokens = static_cast<uint64_t>(trace.tokens[r]);
        const uint64_t end = clock + static_cast<uint64_t>(trace.metrics[time][r]);
        runs.OnIterationBegin({pid, pid, r, trace.seq_len[r], trace.batch[r], tokens, clock});
        runs.OnIterationEnd(
            {pid, pid, r, trace.seq_len[r], trace.batch[r], tokens, clock, end, true});
        clock = end + 1000;
      }
    }
  }
};

RunManagerOptions Options() {
  RunManagerOptions o;
  o.group_by = *ParseRunGroupBy("pid");
  o.selector.budget_count = 32;
  return o;
}

const seqpoint::Trace& Recorded() {
  static const seqpoint::Trace trace = [] {
    auto t = seqpoint::LoadTrace(RecordedTrace());
    REQUIRE(t.ok());
    return std::move(*t);
  }();
  return trace;
}

constexpr size_t kSaved = 120;  // rows delivered and saved before the flush that crashes
constexpr size_t kCrash = 160;  // rows delivered before it (the last 40 not let go)
constexpr size_t kAfter = 200;  // rows delivered after the restart

// In a child: delivers [0, kSaved), flushes (the source lets go), delivers [kSaved, kCrash),
// flushes with `hook`, and exits: 0 when the hook never fired (the flush ran to its end), the
// hook's own code otherwise.
int ChildFlush(const std::string& db, SqliteFaultHook hook) {
  pid_t child = fork();
  if (child == 0) {
    auto store = Store::Open(db);
    if (!store.ok()) _exit(90);
    RunManager runs(store->get(), nullptr, Options());
    Feeder feed{Recorded(), runs};
    feed.Found();
    feed.Rows(0, kSaved);
    if (!runs.Flush().ok()) _exit(91);
    feed.Rows(kSaved, kCrash);
    (*store)->db().set_fault_hook(std::move(hook));
    (void)runs.Flush();
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The restarted daemon: resumes from the database, is given again what the source never let go
// ([kSaved, kCrash): the crashed flush never reached OnStateSaved), then [kCrash, kAfter).
std::map<std::string, uint64_t> Restart(const std::string& db) {
  auto store = Store::Open(db);
  REQUIRE(store.ok());
  RunManager runs(store->get(), nullptr, Options());
  REQUIRE(runs.Resume().ok());
  Feeder feed{Recorded(), runs};
  feed.Found();
  feed.Rows(kSaved, kAfter);
  REQUIRE(runs.Flush().ok());
  std::map<std::string, uint64_t> out;
  for (const auto& [id, t] : runs.runs()) {
    uint64_t hist = 0;
    for (const HistogramBin& b : t->Snapshot().histogram) hist += b.count;
    CHECK(hist == t->record().iterations);
    out[t->record().key] = t->record().iterations;
  }
  return out;
}

}  // namespace

TEST_CASE("flush crash: killed before any statement of a flush, no iteration is lost or doubled") {
  // How many statements one flush has: counted by a child that never dies (a byte each).
  TempDir count_dir;
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  REQUIRE(ChildFlush(count_dir.File("state.db"), [&pipefd](std::string_view) {
            (void)!write(pipefd[1], "s", 1);
            return seqpoint::Status::Ok();
          }) == 0);
  close(pipefd[1]);
  int statements = 0;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) statements += static_cast<int>(n);
  close(pipefd[0]);
  MESSAGE("one flush of two runs: " << statements << " SQL statements");
  REQUIRE(statements > 10);
  for (int k = 1; k <= statements; ++k) {
    CAPTURE(k);
    TempDir dir;
    int seen = 0;
    const int code = ChildFlush(dir.File("state.db"), [&seen, k](std::string_view) {
      if (++seen == k) _exit(77);  // SIGKILL-like: no destructor, no rollback
      return seqpoint::Status::Ok();
    });
    REQUIRE(code == 77);
    auto counts = Restart(dir.File("state.db"));
    CHECK(counts["a"] == kAfter);
    CHECK(counts["b"] == kAfter);
  }
}

TEST_CASE(
    "flush crash: a statement that fails leaves every run unsaved, and the next flush saves all") {
  for (int k = 1; k < 100000; ++k) {  // every statement of the flush, until one past the last
    CAPTURE(k);
    TempDir dir;
    auto store = Store::Open(dir.File("state.db"));
    REQUIRE(store.ok());
    RunManager runs(store->get(), nullptr, Options());
    Feeder feed{Recorded(), runs};
    feed.Found();
    feed.Rows(0, kSaved);
    REQUIRE(runs.Flush().ok());
    feed.Rows(kSaved, kCrash);
    int seen = 0;
    (*store)->db().set_fault_hook([&seen, k](std::string_view) {
      return ++seen == k ? seqpoint::IoError("injected failure") : seqpoint::Status::Ok();
    });
    const bool failed = !runs.Flush().ok();
    (*store)->db().set_fault_hook({});
    if (!failed) break;  // k is past the flush's last statement
    REQUIRE(runs.Flush().ok());
    for (const auto& [id, t] : runs.runs()) {
      auto stored = (*store)->LoadRun(id);
      REQUIRE(stored.ok());
      CHECK(stored->run.iterations == kCrash);
    }
  }
}
