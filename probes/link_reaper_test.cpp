// Detaching without holding the owner's loop (link_reaper.h): real USDT probes on real processes.
// What is asserted is the order of things (every record delivered when DetachPid returns, the
// links closed afterwards, off the owner's thread, and before a re-attach), never a duration:
// the durations are reported as messages (issue 22). Needs root (skips with a message otherwise).
#include "probes/link_reaper.h"

#include <doctest/doctest.h>
#include <time.h>

#include <cstdio>
#include <set>
#include <utility>

#include "probes/iteration_probes.h"
#include "probes/probe_pins.h"
#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"
#include "probes/testing/counter_run.h"

namespace seqpoint::probes {
namespace {

using testing::ChildProcess;
using testing::CollectingSink;
using testing::MakeProbes;
using testing::PollUntil;
using testing::TestProgram;

double NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

ChildProcess StartAttached(IterationProbes& probes, std::vector<std::string> args) {
  std::vector<std::string> argv{TestProgram("usdt_workload"), "--wait"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = ChildProcess::Start(argv);
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  auto attached = probes.AttachPid(child->pid());
  REQUIRE_MESSAGE(attached.ok(), attached.status().ToString());
  REQUIRE(child->WriteLine("go").ok());
  return std::move(*child);
}

TEST_CASE("link reaper: an exited process is delivered whole at once, its links closed after") {
  if (!testing::CanUseBpf()) return;
  CollectingSink sink;
  auto probes = MakeProbes(&sink);
  const size_t fds_before = OpenLinkFds().size();
  ChildProcess child = StartAttached(*probes, {"--iters", "50", "--exit-mid"});
  const int pid = child.pid();
  const size_t links = OpenLinkFds().size() - fds_before;
  CHECK(links >= 2);
  REQUIRE(child.Wait().ok());  // exited, nothing read yet (no Poll)

  const double start = NowMs();
  probes->DetachPid(pid);
  const double detach_ms = NowMs() - start;
  // Everything was delivered inside DetachPid: the 50 iterations and the one it exited in.
  auto ends = sink.EndsOf(pid);
  CHECK(ends.size() == 51);
  CHECK(sink.CompleteOf(pid) == 50);
  CHECK(probes->stats().exited_mid_iteration == 1);
  CHECK_FALSE(probes->IsAttached(pid));

  // The links close on the reaper's thread; Poll forgets the process once they have.
  REQUIRE(
      PollUntil([&] { REQUIRE(probes->Poll(20).ok()); }, [&] { return !probes->Closing(pid); }));
  const double closed_ms = NowMs() - start;
  CHECK(OpenLinkFds().size() == fds_before);
  const LinkReaper::Stats s = probes->detach_stats();
  CHECK(s.closed >= 2);  // the begin and end probes (a USDT link may hold several fds)
  MESSAGE("DetachPid of an exited process with "
          << links << " link fds: " << detach_ms << " ms on the owner's thread; its links closed "
          << closed_ms << " ms after it began, " << static_cast<double>(s.close_ns) / 1e6
          << " ms of closes on the reaper's thread (the "
             "owner waited for them before)");
  CHECK(sink.EndsOf(pid).size() == 51);  // nothing late, nothing twice
}

TEST_CASE("link reaper: a live process detached and attached again at once is recorded once") {
  if (!testing::CanUseBpf()) return;
  CollectingSink sink;
  auto probes = MakeProbes(&sink);
  ChildProcess child = StartAttached(*probes, {"--loop", "--loop-sleep-us", "200"});
  const int pid = child.pid();
  REQUIRE(PollUntil([&] { REQUIRE(probes->Poll(20).ok()); },
                    [&] { return sink.CompleteOf(pid) >= 20; }));
  probes->DetachPid(pid);
  const size_t before = sink.EndsOf(pid).size();
  // Attached again while its old links may still be closing: AttachPid waits for them, or the
  // old and the new probes would both record every iteration.
  auto again = probes->AttachPid(pid);
  REQUIRE_MESSAGE(again.ok(), again.status().ToString());
  CHECK_FALSE(probes->Closing(pid));
  REQUIRE(PollUntil([&] { REQUIRE(probes->Poll(20).ok()); },
                    [&] { return sink.CompleteOf(pid) >= before + 40; }));
  REQUIRE(child.WriteLine("stop").ok());
  REQUIRE(child.Wait().ok());
  probes->DetachPid(pid);
  std::set<std::pair<uint64_t, uint32_t>> seen;
  for (const IterationEvent& e : sink.EndsOf(pid)) {
    CHECK_MESSAGE(seen.insert({e.iter, e.tid}).second, "iteration " << e.iter << " twice");
  }
}

TEST_CASE("link reaper: what detaching a process with probe counters still costs the owner") {
  if (!testing::CanUseBpf()) return;
  CollectingSink sink;
  auto probes = MakeProbes(&sink);
  ChildProcess child = StartAttached(*probes, {"--loop"});
  const int pid = child.pid();
  Status armed = probes->ArmCounters(pid, {testing::kTaskClock});
  if (!armed.ok()) {
    MESSAGE("SKIP the armed case: " << armed.ToString());
    return;
  }
  REQUIRE(PollUntil([&] { REQUIRE(probes->Poll(20).ok()); },
                    [&] { return sink.CompleteOf(pid) >= 5; }));
  // The last armed process: Disarm also detaches the context-switch and exec hooks, inline.
  const double start = NowMs();
  probes->DetachPid(pid);
  MESSAGE("DetachPid of a live process with probe counters armed (the last one): "
          << NowMs() - start << " ms on the owner's thread");
  CHECK(probes->CounterEvents(pid) == nullptr);
  REQUIRE(child.WriteLine("stop").ok());
  REQUIRE(child.Wait().ok());
}

TEST_CASE("link reaper: DetachAll returns with every link closed") {
  if (!testing::CanUseBpf()) return;
  CollectingSink sink;
  auto probes = MakeProbes(&sink);
  const size_t fds_before = OpenLinkFds().size();
  ChildProcess a = StartAttached(*probes, {"--loop"});
  ChildProcess b = StartAttached(*probes, {"--loop"});
  CHECK(OpenLinkFds().size() > fds_before);
  const double start = NowMs();
  probes->DetachAll();
  MESSAGE("DetachAll of 2 live processes: " << NowMs() - start << " ms");
  CHECK(OpenLinkFds().size() == fds_before);
  CHECK_FALSE(probes->Closing(a.pid()));
  CHECK_FALSE(probes->Closing(b.pid()));
  for (ChildProcess* c : {&a, &b}) {
    REQUIRE(c->WriteLine("stop").ok());
    REQUIRE(c->Wait().ok());
  }
}

}  // namespace
}  // namespace seqpoint::probes
