// Counter windows at the probes against windows opened from user space (probes/probe_counters.h,
// collectors/perf/perf_collector.h).
//
//   probe_counters_bench [ITERATIONS] [THREADS] [WORK_US]     (root; defaults 200 2 2000)
//
// Runs testing/counter_workload (1 + THREADS threads, each burning WORK_US of CPU inside every
// iteration; it reports its own per-iteration CPU time from its threads' CLOCK_THREAD_CPUTIME_ID)
// twice, with every iteration hooked, and measures task-clock per iteration:
//  (a) user space, the path the agent took before (the baseline): the begin record wakes this
//      process, whose OnBegin begins the perf collector (every thread, inherit) and whose OnEnd
//      ends it, as RunManager does at OnIterationBegin / OnIterationEnd;
//  (b) probe: the probes read task-clock themselves at the begin and end probes.
// Printed per path: the window's start offset (the wake-up to OnBegin minus the probe's
// timestamp; zero by construction at the probes) and |task-clock - the workload's own|, median,
// 90th percentile and max, in microseconds and percent. Nothing here asserts.
#include <linux/perf_event.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "collectors/collector_config.h"
#include "collectors/perf/perf_collector.h"
#include "probes/iteration_probes.h"
#include "probes/testing/child_process.h"

namespace {

using namespace seqpoint;
using probes::IterationEvent;

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Today's path: the collector begins and ends where the agent's callbacks run.
class UserSpaceSink : public probes::ProbeEventSink {
 public:
  collectors::PerfCollector* perf = nullptr;
  std::vector<double> offset_us;
  std::map<uint64_t, double> task_clock;  // by iteration
  std::map<uint64_t, uint64_t> probe_counters;
  void OnBegin(const IterationEvent& e) override {
    if (perf == nullptr) return;
    offset_us.push_back((static_cast<double>(NowNs()) - static_cast<double>(e.begin_ns)) / 1e3);
    (void)perf->Begin();
    measuring_ = true;
  }
  void OnEnd(const IterationEvent& e) override {
    if (e.counter_mask & 1u) probe_counters[e.iter] = e.counters[0];
    if (!measuring_) return;
    measuring_ = false;
    auto samples = perf->End();
    if (!samples.ok()) return;
    for (const auto& s : *samples) {
      if (s.name == "perf:task-clock") task_clock[e.iter] = s.value;
    }
  }

 private:
  bool measuring_ = false;
};

struct Quantiles {
  double median = 0, p90 = 0, max = 0;
};
Quantiles Of(std::vector<double> v) {
  Quantiles q;
  if (v.empty()) return q;
  std::sort(v.begin(), v.end());
  q.median = v[v.size() / 2];
  q.p90 = v[static_cast<size_t>(0.9 * static_cast<double>(v.size() - 1))];
  q.max = v.back();
  return q;
}

// One run of the workload; in_probe picks the path.
void RunOnce(bool in_probe, const std::string& iters, const std::string& threads,
             const std::string& work_us) {
  UserSpaceSink sink;
  auto p = probes::IterationProbes::Create({}, &sink);
  if (!p.ok()) {
    std::fprintf(stderr, "probe_counters_bench: %s\n", p.status().ToString().c_str());
    std::exit(1);
  }
  auto& pr = **p;
  auto child = probes::testing::ChildProcess::Start(
      {probes::testing::TestProgram("counter_workload"), "--wait", "--iters", iters, "--threads",
       threads, "--work-us", work_us});
  if (!child.ok() || !child->ReadLine().ok()) std::exit(1);
  const int pid = child->pid();
  if (!pr.AttachPid(pid).ok()) std::exit(1);
  pr.SetHookMode(probes::HookMode::kWanted);
  (void)pr.WantSeqLen(pid, SP_ANY_SEQ_LEN, 0xffffffffu);
  collectors::PerfOptions options;
  options.events = {"task-clock"};
  options.pmu_trap_check = false;
  collectors::PerfCollector perf(options, "/proc");
  if (in_probe) {
    Status armed = pr.ArmCounters(
        pid, {{"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, "ns"}});
    if (!armed.ok()) {
      std::fprintf(stderr, "probe_counters_bench: %s\n", armed.ToString().c_str());
      std::exit(1);
    }
  } else {
    Status opened = perf.Open({pid, ""});
    if (!opened.ok()) std::exit(1);
    sink.perf = &perf;
  }
  if (!child->WriteLine("go").ok()) std::exit(1);
  // The workload's lines are read on a thread of their own, so this one waits on the ring
  // buffer's wakeups alone, as the daemon's event loop does.
  std::map<uint64_t, double> own;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    for (;;) {
      auto line = child->ReadLine(120000);
      if (!line.ok()) break;
      unsigned long long it = 0, ns = 0;
      if (std::sscanf(line->c_str(), "cpu %llu %llu", &it, &ns) == 2) own[it] = double(ns);
      if (line->rfind("done", 0) == 0) break;
    }
    done = true;
  });
  while (!done) (void)pr.Poll(100);
  reader.join();
  for (int i = 0; i < 20; ++i) (void)pr.Poll(10);
  (void)child->Wait();
  pr.DetachPid(pid);

  std::vector<double> diff_us, diff_pct;
  for (const auto& [it, own_ns] : own) {
    if (it < 10) continue;  // helpers registered, caches warm
    double measured = 0;
    if (in_probe) {
      auto m = sink.probe_counters.find(it);
      if (m == sink.probe_counters.end()) continue;
      measured = double(m->second);
    } else {
      auto m = sink.task_clock.find(it);
      if (m == sink.task_clock.end()) continue;
      measured = m->second;
    }
    diff_us.push_back(std::abs(measured - own_ns) / 1e3);
    diff_pct.push_back(100 * std::abs(measured - own_ns) / own_ns);
  }
  Quantiles us = Of(diff_us), pct = Of(diff_pct), off = Of(sink.offset_us);
  std::printf("%-10s %5zu iterations  window start offset us: median %8.1f p90 %8.1f max %8.1f"
              "  |task-clock - own| us: median %7.1f p90 %7.1f max %8.1f  (%%: %.2f %.2f %.2f)\n",
              in_probe ? "probe" : "user-space", diff_us.size(), off.median, off.p90, off.max,
              us.median, us.p90, us.max, pct.median, pct.p90, pct.max);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string iters = argc > 1 ? argv[1] : "200";
  const std::string threads = argc > 2 ? argv[2] : "2";
  const std::string work_us = argc > 3 ? argv[3] : "2000";
  std::printf("counter_workload: %s iterations, 1 + %s threads x %s us of CPU each\n",
              iters.c_str(), threads.c_str(), work_us.c_str());
  RunOnce(/*in_probe=*/false, iters, threads, work_us);  // the baseline first
  RunOnce(/*in_probe=*/true, iters, threads, work_us);
  return 0;
}
