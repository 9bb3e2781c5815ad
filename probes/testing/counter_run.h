// Runs testing/counter_workload under the iteration probes with probe counters armed, and holds
// each iteration's counters against the workload's own reading of the same iteration (for the
// probe counter tests). Header-only, test code.
#pragma once

#include <doctest/doctest.h>
#include <linux/perf_event.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "probes/iteration_probes.h"
#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"

namespace seqpoint::probes::testing {

inline const ProbeCounterEvent kTaskClock{"task-clock", PERF_TYPE_SOFTWARE,
                                          PERF_COUNT_SW_TASK_CLOCK, "ns"};
inline const ProbeCounterEvent kContextSwitches{"context-switches", PERF_TYPE_SOFTWARE,
                                                PERF_COUNT_SW_CONTEXT_SWITCHES, "count"};
inline const ProbeCounterEvent kPageFaults{"page-faults", PERF_TYPE_SOFTWARE,
                                           PERF_COUNT_SW_PAGE_FAULTS, "count"};

struct Measured {
  std::vector<IterationEvent> ends;
  std::map<uint64_t, uint64_t> own_cpu_ns;    // the workload's own, every thread, per iteration
  std::map<uint64_t, uint64_t> own_switches;  // its own context switches (getrusage), likewise
  // The same sum read just outside the markers: the probes' count lies in [own_cpu_ns, this]
  // (counter_workload's "span"), however long main took from a marker to its read.
  std::map<uint64_t, uint64_t> own_span_ns;
  // The process's CPU clock across the inner reads (counter_workload's "proc").
  std::map<uint64_t, uint64_t> own_proc_ns;
  ProbeCounterProcStats stats;
  bool exec_seen = false;
  ProbeCounterProcStats at_exec;  // while the new image waits, before it is attached again
  // The probes' kernel stats (enum sp_stat) over this run: why windows were flagged.
  std::array<uint64_t, SP_STAT_COUNT> kernel{};
};

// Every window flagged for an uncounted thread has its reason counted by the probes: a thread on
// a CPU with no switch-in noted, the probing thread's own, or a run of unknown length inside it.
inline void CheckUncountedExplained(const Measured& m) {
  size_t uncounted = 0;
  for (const IterationEvent& e : m.ends) {
    uncounted += (e.counter_flags & SP_COUNTERS_UNCOUNTED_THREAD) != 0;
  }
  const uint64_t on_cpu = m.kernel[SP_STAT_COUNTER_UNSEEN_ON_CPU];
  const uint64_t self = m.kernel[SP_STAT_COUNTER_UNSEEN_SELF];
  const uint64_t unknown = m.kernel[SP_STAT_COUNTER_UNKNOWN_RUN];
  MESSAGE(uncounted << " windows flagged for an uncounted thread; probes that saw one on a CPU "
                    << "unseen: " << on_cpu << ", the probing thread's own: " << self
                    << "; windows with a run of unknown length: " << unknown);
  CHECK(uncounted <= on_cpu + self + unknown);
}

// Each thread of `pid`: its state and the kernel function it waits in (/proc), for a failure.
inline std::string ThreadStates(int pid) {
  std::string out;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;  // the process may be gone: no exception, an empty list
  for (const auto& t : std::filesystem::directory_iterator(task, ec)) {
    std::ifstream stat(t.path() / "stat"), wchan(t.path() / "wchan");
    std::string s((std::istreambuf_iterator<char>(stat)), {}), w;
    std::getline(wchan, w);
    const size_t paren = s.rfind(')');
    out += " " + t.path().filename().string() + ":" +
           (paren != std::string::npos && paren + 2 < s.size() ? s.substr(paren + 2, 1) : "?") +
           "/" + (w.empty() ? "-" : w);
  }
  return out.empty() ? " (none: the process is gone)" : out;
}

// Runs counter_workload with hooks on every iteration and `events` armed (when not empty). After
// an exec the probes are attached again to the new image; the counters stay armed.
inline Measured RunWorkload(IterationProbes& probes, CollectingSink& sink,
                            const std::vector<ProbeCounterEvent>& events,
                            std::vector<std::string> args, Status* arm_status = nullptr) {
  std::vector<std::string> argv{TestProgram("counter_workload"), "--wait"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::array<uint64_t, SP_STAT_COUNT> kernel_before = probes.totals().kernel;
  auto child = ChildProcess::Start(argv);
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  const int pid = child->pid();
  auto attached = probes.AttachPid(pid);
  REQUIRE_MESSAGE(attached.ok(), attached.status().ToString());
  probes.SetHookMode(HookMode::kWanted);
  REQUIRE(probes.WantSeqLen(pid, SP_ANY_SEQ_LEN, 0xffffffffu).ok());
  if (!events.empty()) {
    Status armed = probes.ArmCounters(pid, events);
    if (arm_status != nullptr) {
      *arm_status = armed;
    } else {
      REQUIRE_MESSAGE(armed.ok(), armed.ToString());
    }
  }
  REQUIRE(child->WriteLine("go").ok());
  Measured m;
  size_t want = 0;
  const int64_t deadline = MonotonicMs() + 60000;
  std::string last = "ready";  // the last line read, for a failure to say where it stopped
  for (;;) {
    REQUIRE(probes.Poll(0).ok());
    auto line = child->ReadLine(10);
    if (!line.ok()) {
      // A workload that died (its stdout closed) says so at once, with how it ended; one that
      // stopped says where, and what its threads wait in.
      if (line.status().message().find("closed its stdout") != std::string::npos) {
        auto status = child->Wait(5000);
        FAIL("counter_workload ended early (exit status "
             << (status.ok() ? std::to_string(*status) : status.status().ToString())
             << ") after the line '" << last << "'");
      }
      REQUIRE_MESSAGE(MonotonicMs() < deadline,
                      "counter_workload stopped after the line '"
                          << last << "' for 60 s; its threads: " << ThreadStates(pid));
      continue;
    }
    last = *line;
    unsigned long long iter = 0, ns = 0, n = 0;
    if (std::sscanf(line->c_str(), "all %llu %llu", &iter, &ns) == 2) m.own_cpu_ns[iter] = ns;
    if (std::sscanf(line->c_str(), "csw %llu %llu", &iter, &n) == 2) m.own_switches[iter] = n;
    if (std::sscanf(line->c_str(), "span %llu %llu", &iter, &ns) == 2) m.own_span_ns[iter] = ns;
    if (std::sscanf(line->c_str(), "proc %llu %llu", &iter, &ns) == 2) m.own_proc_ns[iter] = ns;
    if (std::sscanf(line->c_str(), "done %llu", &n) == 1) {
      want = m.own_cpu_ns.size();
      break;
    }
    if (line->rfind("exec", 0) == 0) m.exec_seen = true;
    if (m.exec_seen && line->rfind("ready", 0) == 0) {
      // The new image waits on stdin, its old threads dead: none of them may still count as on a
      // CPU (the exec'ing helper's record moved to main's tid, its run banked at the wait).
      PollUntil([] { usleep(1000); }, [&] { return probes.CounterStats(pid).running == 0; }, 2000);
      m.at_exec = probes.CounterStats(pid);
      // Then what the daemon does at an exec: detach the old image, attach and arm the new one.
      probes.DetachPid(pid);
      auto again = probes.AttachPid(pid);
      REQUIRE_MESSAGE(again.ok(), again.status().ToString());
      REQUIRE(probes.WantSeqLen(pid, SP_ANY_SEQ_LEN, 0xffffffffu).ok());
      if (!events.empty()) REQUIRE(probes.ArmCounters(pid, events).ok());
      REQUIRE(child->WriteLine("go").ok());
    }
  }
  const bool all_ended = PollUntil([&] { REQUIRE(probes.Poll(20).ok()); },
                                   [&] { return sink.EndsOf(pid).size() >= want; });
  REQUIRE_MESSAGE(all_ended, sink.EndsOf(pid).size() << " ends of " << want << " iterations");
  m.stats = probes.CounterStats(pid);
  const std::array<uint64_t, SP_STAT_COUNT> kernel_after = probes.totals().kernel;
  for (size_t i = 0; i < m.kernel.size(); ++i) m.kernel[i] = kernel_after[i] - kernel_before[i];
  REQUIRE(child->Wait().ok());
  probes.DetachPid(pid);
  m.ends = sink.EndsOf(pid);
  return m;
}

inline std::unique_ptr<IterationProbes> MakeProbes(CollectingSink* sink, bool counters = true) {
  IterationProbesOptions options;
  options.counters = counters;
  auto probes = IterationProbes::Create(options, sink);
  REQUIRE_MESSAGE(probes.ok(), probes.status().ToString());
  return std::move(*probes);
}

// Per-iteration differences between the probes' task-clock (counter 0) and the workload's own
// reading of every thread's CPU time.
struct Agreement {
  size_t compared = 0;
  size_t flagged = 0;        // task-clock left out by the probes (counter_flags)
  std::string flagged_list;  // "iter:flags" of those
  std::vector<double> rel;   // |probes - own| / own, sorted
  std::vector<double> abs_us;
  // How far the probes' count lies outside [own, span] (0 inside), over own, sorted: the probes'
  // own error where a sibling runs on across a probe while main goes from the marker to its read
  // (|probes - own| holds that time too). And the width of that bracket (span - own), us.
  std::vector<double> outside_rel;
  std::vector<double> outside_us;
  std::vector<double> bracket_us;
  double Quantile(const std::vector<double>& v, double q) const {
    return v.empty() ? 0 : v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
  }
};

inline Agreement Compare(const Measured& m, uint64_t min_own_ns, const char* what) {
  Agreement a;
  for (const IterationEvent& e : m.ends) {
    REQUIRE(e.complete());
    if ((e.counter_mask & 1u) == 0) {
      CHECK(e.counter_flags != 0);  // a missing value always says why
      ++a.flagged;
      a.flagged_list += " " + std::to_string(e.iter) + ":" + std::to_string(e.counter_flags);
      continue;
    }
    auto own_it = m.own_cpu_ns.find(e.iter);
    if (own_it == m.own_cpu_ns.end()) continue;  // its report was lost to the exec
    const double own = static_cast<double>(own_it->second);
    const double probe = static_cast<double>(e.counters[0]);
    CHECK(own >= static_cast<double>(min_own_ns));
    a.rel.push_back(std::abs(probe - own) / own);
    a.abs_us.push_back(std::abs(probe - own) / 1000);
    auto span_it = m.own_span_ns.find(e.iter);
    if (span_it != m.own_span_ns.end()) {
      const double span = static_cast<double>(span_it->second);
      CHECK(span >= own);
      const double outside = probe < own ? own - probe : probe > span ? probe - span : 0;
      a.outside_rel.push_back(outside / own);
      a.outside_us.push_back(outside / 1000);
      a.bracket_us.push_back((span - own) / 1000);
    }
    ++a.compared;
  }
  CheckUncountedExplained(m);
  std::sort(a.rel.begin(), a.rel.end());
  std::sort(a.abs_us.begin(), a.abs_us.end());
  std::sort(a.outside_rel.begin(), a.outside_rel.end());
  std::sort(a.outside_us.begin(), a.outside_us.end());
  std::sort(a.bracket_us.begin(), a.bracket_us.end());
  MESSAGE(std::string(what)
          << ": task-clock vs the workload's own CPU clocks of every thread: " << a.compared
          << " iterations, |difference| median " << a.Quantile(a.abs_us, 0.5) << " us ("
          << a.Quantile(a.rel, 0.5) * 100 << "%), 90th percentile " << a.Quantile(a.abs_us, 0.9)
          << " us (" << a.Quantile(a.rel, 0.9) * 100 << "%), max " << a.Quantile(a.abs_us, 1.0)
          << " us (" << a.Quantile(a.rel, 1.0) * 100 << "%); " << a.flagged << " flagged"
          << a.flagged_list << " (runs not seen switching "
          << "in: " << m.stats.unknown_runs << ", threads left out: " << m.stats.untracked
          << ", snapshot retries: " << m.stats.snapshot_retries
          << ", switch-ins the tracepoint did not report: " << m.stats.unseen_runs << ")");
  if (!a.outside_rel.empty()) {
    MESSAGE(
        std::string(what) << ": outside [own at the inner reads, own at the outer reads]: median "
                          << a.Quantile(a.outside_rel, 0.5) * 100 << "%, 90th percentile "
                          << a.Quantile(a.outside_rel, 0.9) * 100 << "%, max "
                          << a.Quantile(a.outside_rel, 1.0) * 100
                          << "%; that bracket's width median " << a.Quantile(a.bracket_us, 0.5)
                          << " us, max " << a.Quantile(a.bracket_us, 1.0) << " us");
  }
  return a;
}

// Flagged windows that no switch-in the tracepoint missed explains. The sched_switch tracepoint
// does not report every switch (neither to eBPF nor to ftrace): a thread that runs after one it
// did not report is switched in unseen, and the probes flag every window with a probe inside
// that run (SP_COUNTERS_UNCOUNTED_THREAD), from its unseen switch-in to its switch-out, where
// the run is counted (stats.unseen_runs, or unknown_runs when its length is not known). One such
// run flags one stretch of consecutive windows, however long the thread stays on its CPU: the
// longest such stretches, one per run the probes counted, are explained; the rest are not.
inline size_t FlaggedBeyondUnseenRuns(const Measured& m) {
  std::set<uint64_t> unseen;  // iterations flagged for a thread on a CPU unseen
  size_t flagged = 0;
  for (const IterationEvent& e : m.ends) {
    if ((e.counter_mask & 1u) != 0) continue;
    ++flagged;
    if ((e.counter_flags & SP_COUNTERS_UNCOUNTED_THREAD) != 0) unseen.insert(e.iter);
  }
  std::vector<size_t> stretches;
  uint64_t last = 0;
  for (uint64_t iter : unseen) {
    if (stretches.empty() || iter != last + 1) stretches.push_back(0);
    ++stretches.back();
    last = iter;
  }
  std::sort(stretches.rbegin(), stretches.rend());
  const size_t runs = m.stats.unseen_runs + m.stats.unknown_runs;
  size_t explained = 0;
  for (size_t i = 0; i < stretches.size() && i < runs; ++i) explained += stretches[i];
  MESSAGE(flagged << " flagged windows, " << stretches.size() << " stretches of windows with a "
                  << "thread on a CPU unseen, " << runs << " runs the tracepoint did not report "
                  << "the switch-in of: " << flagged - explained << " flagged windows unexplained");
  return flagged - explained;
}

}  // namespace seqpoint::probes::testing
