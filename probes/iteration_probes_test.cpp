// Real USDT probes on real processes: the test programs in testing/ mark their iterations with
// the SDK header; every behaviour of the event path is checked on what the kernel delivers.
// Needs root (skips with a message otherwise).
#include "probes/iteration_probes.h"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <set>

#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"

namespace seqpoint::probes {
namespace {

using testing::ChildProcess;
using testing::CollectingSink;
using testing::PollUntil;
using testing::TestProgram;

// Starts usdt_workload with --wait, attaches, lets it run to completion, collects everything.
struct Run {
  CollectingSink sink;
  std::unique_ptr<IterationProbes> probes;
  int pid = 0;
};

void Poll(IterationProbes& p) { REQUIRE(p.Poll(50).ok()); }

std::unique_ptr<IterationProbes> MakeProbes(CollectingSink* sink,
                                            IterationProbesOptions options = {}) {
  auto probes = IterationProbes::Create(options, sink);
  REQUIRE_MESSAGE(probes.ok(), probes.status().ToString());
  return std::move(*probes);
}

void RunWorkload(Run* run, std::vector<std::string> args, size_t expect_ends,
                 const std::string& program = "usdt_workload") {
  std::vector<std::string> argv{TestProgram(program), "--wait"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = ChildProcess::Start(argv);
  REQUIRE(child.ok());
  auto ready = child->ReadLine();
  REQUIRE(ready.ok());
  run->pid = child->pid();
  auto attached = run->probes->AttachPid(run->pid);
  REQUIRE_MESSAGE(attached.ok(), attached.status().ToString());
  CHECK(*attached >= 1);
  REQUIRE(child->WriteLine("go").ok());
  REQUIRE(PollUntil([&] { Poll(*run->probes); },
                    [&] { return run->sink.EndsOf(run->pid).size() >= expect_ends; }));
  auto status = child->Wait();
  REQUIRE(status.ok());
  run->probes->DetachPid(run->pid);
}

TEST_CASE("usdt: every iteration of a C++ program arrives with its SL, batch, tokens, times") {
  if (!testing::CanUseBpf()) return;
  Run run;
  run.probes = MakeProbes(&run.sink);
  RunWorkload(&run, {"--iters", "60", "--seq-lens", "5,17,33"}, 60);
  auto ends = run.sink.EndsOf(run.pid);
  REQUIRE(ends.size() == 60);
  const uint32_t sls[] = {5, 17, 33};
  for (const IterationEvent& e : ends) {
    CHECK(e.complete());
    CHECK(e.valid_seq_len());
    CHECK(e.seq_len == sls[e.iter % 3]);
    CHECK(e.batch == 4);
    CHECK(e.tokens == uint64_t{e.seq_len} * 4);
    CHECK(e.end_ns > e.begin_ns);
    CHECK(e.tid == ends.front().tid);  // one worker thread
    CHECK(e.tid != 0);
    CHECK(e.probe == 0);
  }
  CHECK(run.sink.begins.empty());  // no hooks asked
  IterationProbeStats s = run.probes->stats();
  CHECK(s.lost() == 0);
  CHECK(s.kernel[SP_STAT_HITS] == 120);
  CHECK(s.per_pid[run.pid].iterations == 60);
  CHECK(s.per_pid[run.pid].hits == 120);
  CHECK_FALSE(s.per_pid[run.pid].attached);
}

TEST_CASE("usdt: a stripped binary keeps its USDT notes and is probed") {
  if (!testing::CanUseBpf()) return;
  Run run;
  run.probes = MakeProbes(&run.sink);
  RunWorkload(&run, {"--iters", "10", "--seq-lens", "9"}, 10, "usdt_workload_stripped");
  for (const IterationEvent& e : run.sink.EndsOf(run.pid)) CHECK(e.seq_len == 9);
}

TEST_CASE("usdt: iterations of four threads overlap, each is complete, overlaps are flagged") {
  if (!testing::CanUseBpf()) return;
  Run run;
  run.probes = MakeProbes(&run.sink);
  RunWorkload(&run, {"--threads", "4", "--iters", "100", "--work-us", "300"}, 400);
  auto ends = run.sink.EndsOf(run.pid);
  REQUIRE(ends.size() == 400);
  std::set<uint32_t> tids;
  size_t overlapped = 0;
  for (const IterationEvent& e : ends) {
    CHECK(e.complete());
    tids.insert(e.tid);
    overlapped += (e.flags & SP_FLAG_OVERLAP) != 0;
  }
  CHECK(tids.size() == 4);
  CHECK(overlapped > 0);
  CHECK(run.probes->stats().kernel[SP_STAT_OVERLAP] == overlapped);
}

TEST_CASE("usdt: a begin with no end is reported ABANDONED, an end with no begin NO_BEGIN") {
  if (!testing::CanUseBpf()) return;
  Run run;
  run.probes = MakeProbes(&run.sink);
  RunWorkload(&run, {"--iters", "8", "--skip-end", "3", "--skip-begin", "5"}, 8);
  auto ends = run.sink.EndsOf(run.pid);
  REQUIRE(ends.size() == 8);
  for (const IterationEvent& e : ends) {
    if (e.iter == 3) {
      CHECK((e.flags & SP_FLAG_ABANDONED) != 0);
      CHECK(e.seq_len == 16);  // what its begin said
      CHECK_FALSE(e.complete());
    } else if (e.iter == 5) {
      CHECK((e.flags & SP_FLAG_NO_BEGIN) != 0);
      CHECK_FALSE(e.complete());
    } else {
      CHECK(e.complete());
    }
  }
  auto s = run.probes->stats();
  CHECK(s.kernel[SP_STAT_ABANDONED] == 1);
  CHECK(s.kernel[SP_STAT_NO_BEGIN] == 1);
  CHECK(s.per_pid[run.pid].incomplete == 2);
}

TEST_CASE("usdt: a process that exits mid-iteration has that iteration reported EXITED") {
  if (!testing::CanUseBpf()) return;
  Run run;
  run.probes = MakeProbes(&run.sink);
  RunWorkload(&run, {"--iters", "4", "--exit-mid"}, 4);  // DetachPid after its exit
  auto ends = run.sink.EndsOf(run.pid);
  REQUIRE(ends.size() == 5);
  const IterationEvent& last = ends.back();
  CHECK(last.iter == 999999999);
  CHECK((last.flags & SP_FLAG_EXITED) != 0);
  CHECK(last.begin_ns != 0);
  CHECK(last.end_ns == 0);
  CHECK(run.probes->stats().exited_mid_iteration == 1);
}

TEST_CASE("usdt: SL 0 and an absurd SL are delivered flagged and counted, never dropped") {
  if (!testing::CanUseBpf()) return;
  Run run;
  IterationProbesOptions options;
  options.max_seq_len = 100000;
  run.probes = MakeProbes(&run.sink, options);
  RunWorkload(&run, {"--iters", "6", "--seq-lens", "0,16,4000000000"}, 6);
  auto ends = run.sink.EndsOf(run.pid);
  REQUIRE(ends.size() == 6);
  for (const IterationEvent& e : ends) {
    CHECK(e.complete());
    if (e.iter % 3 == 0) CHECK(e.flags == SP_FLAG_SL_ZERO);
    if (e.iter % 3 == 1) CHECK(e.valid_seq_len());
    if (e.iter % 3 == 2) CHECK(e.flags == SP_FLAG_SL_HUGE);
    if (e.iter % 3 == 2) CHECK(e.seq_len == 4000000000u);
  }
  auto s = run.probes->stats();
  CHECK(s.kernel[SP_STAT_SL_ZERO] == 2);
  CHECK(s.kernel[SP_STAT_SL_HUGE] == 2);
}

TEST_CASE("hooks: OnBegin fires for wanted iterations and SLs only, promptly woken") {
  if (!testing::CanUseBpf()) return;
  Run run;
  run.probes = MakeProbes(&run.sink);
  run.probes->SetHookMode(HookMode::kWanted);
  std::vector<std::string> argv{
      TestProgram("usdt_workload"), "--wait", "--iters", "30", "--seq-lens", "10,20,33"};
  auto child = ChildProcess::Start(argv);
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  run.pid = child->pid();
  REQUIRE(run.probes->AttachPid(run.pid).ok());
  REQUIRE(run.probes->WantIteration(run.pid, 4).ok());   // SL 20
  REQUIRE(run.probes->WantSeqLen(run.pid, 33, 2).ok());  // iterations 2 and 5
  REQUIRE(child->WriteLine("go").ok());
  REQUIRE(
      PollUntil([&] { Poll(*run.probes); }, [&] { return run.sink.EndsOf(run.pid).size() >= 30; }));
  REQUIRE(child->Wait().ok());
  std::vector<uint64_t> begun;
  for (const IterationEvent& e : run.sink.BeginsOf(run.pid)) {
    begun.push_back(e.iter);
    CHECK((e.flags & SP_FLAG_HOOKED) != 0);
    CHECK(e.end_ns == 0);
  }
  CHECK(begun == std::vector<uint64_t>{2, 4, 5});
  size_t hooked_ends = 0;
  for (const IterationEvent& e : run.sink.EndsOf(run.pid)) {
    hooked_ends += (e.flags & SP_FLAG_HOOKED) != 0;
  }
  CHECK(hooked_ends == 3);
  CHECK(run.probes->stats().hook_latency.count == 6);  // 3 begins + 3 ends, each measured
  run.probes->DetachPid(run.pid);
}

TEST_CASE("hooks: kAll gives an OnBegin for every iteration") {
  if (!testing::CanUseBpf()) return;
  Run run;
  run.probes = MakeProbes(&run.sink);
  run.probes->SetHookMode(HookMode::kAll);
  RunWorkload(&run, {"--iters", "12"}, 12);
  CHECK(run.sink.BeginsOf(run.pid).size() == 12);
}

TEST_CASE("attach: a process without the provider is a clear NotFound, nothing stays attached") {
  if (!testing::CanUseBpf()) return;
  CollectingSink sink;
  auto probes = MakeProbes(&sink);
  auto child = ChildProcess::Start({TestProgram("plain_workload")});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  auto attached = probes->AttachPid(child->pid());
  REQUIRE_FALSE(attached.ok());
  CHECK(attached.status().code() == ErrorCode::kNotFound);
  CHECK(attached.status().message().find("carries no seqpoint USDT provider") != std::string::npos);
  CHECK(attached.status().message().find("plain_workload") != std::string::npos);
  CHECK_FALSE(probes->IsAttached(child->pid()));
  auto gone = probes->AttachPid(999999999);
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.status().code() == ErrorCode::kNotFound);
  REQUIRE(child->WriteLine("go").ok());
  REQUIRE(child->Wait().ok());
}

TEST_CASE("attach: a reused pid (new start time) is detached and attached afresh") {
  if (!testing::CanUseBpf()) return;
  CollectingSink sink;
  auto probes = MakeProbes(&sink);
  auto child = ChildProcess::Start({TestProgram("usdt_workload"), "--wait", "--iters", "5"});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  TargetFinder finder("/proc", {});
  auto targets = finder.Find(child->pid());
  REQUIRE(targets.ok());
  ProcessTargets older = *targets;
  older.identity.start_time -= 1;  // as if an earlier process had held this pid
  REQUIRE(probes->AttachTargets(older).ok());
  auto again = probes->AttachTargets(*targets);
  REQUIRE(again.ok());
  CHECK(*again == 1);  // re-attached, not "already there"
  REQUIRE(child->WriteLine("go").ok());
  REQUIRE(PollUntil([&] { Poll(*probes); }, [&] { return sink.CompleteOf(child->pid()) >= 5; }));
  REQUIRE(child->Wait().ok());
}

TEST_CASE("lifecycle: after the probes are destroyed none of their programs is loaded") {
  if (!testing::CanUseBpf()) return;
  auto before = LoadedSeqpointProgramIds();
  REQUIRE(before.ok());
  std::set<uint32_t> ours;
  {
    Run run;
    run.probes = MakeProbes(&run.sink);
    auto child = ChildProcess::Start({TestProgram("usdt_workload"), "--wait", "--iters", "3"});
    REQUIRE(child.ok());
    REQUIRE(child->ReadLine().ok());
    REQUIRE(run.probes->AttachPid(child->pid()).ok());
    auto loaded = LoadedSeqpointProgramIds();
    REQUIRE(loaded.ok());
    for (uint32_t id : *loaded) {
      if (before->count(id) == 0) ours.insert(id);
    }
    CHECK(ours.size() >= 4);  // ours; another agent may load its own meanwhile
    REQUIRE(child->WriteLine("go").ok());
    REQUIRE(child->Wait().ok());
    // destroyed here while still attached to the (exited) process
  }
  bool gone = PollUntil([] { usleep(20000); },
                        [&] {
                          auto now = LoadedSeqpointProgramIds();
                          if (!now.ok()) return false;
                          for (uint32_t id : ours) {
                            if (now->count(id) > 0) return false;
                          }
                          return true;
                        },
                        10000);
  CHECK(gone);
}

TEST_CASE("faults: without root, Create says so instead of failing obscurely") {
  if (!testing::CanUseBpf()) return;
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(3);
    CollectingSink sink;
    auto probes = IterationProbes::Create({}, &sink);
    if (probes.ok()) _exit(1);
    bool clear = probes.status().code() == ErrorCode::kPermissionDenied &&
                 probes.status().message().find("run as root") != std::string::npos;
    if (!clear) std::fprintf(stderr, "got: %s\n", probes.status().ToString().c_str());
    _exit(clear ? 0 : 2);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("faults: a kernel BTF file that does not exist is named in the error") {
  if (!testing::CanUseBpf()) return;
  CollectingSink sink;
  IterationProbesOptions options;
  options.btf_path = "/nonexistent/vmlinux.btf";
  auto probes = IterationProbes::Create(options, &sink);
  REQUIRE_FALSE(probes.ok());
  CHECK(probes.status().code() == ErrorCode::kNotFound);
  CHECK(probes.status().message().find("/nonexistent/vmlinux.btf") != std::string::npos);
}

}  // namespace
}  // namespace seqpoint::probes
