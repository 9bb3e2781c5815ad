// Profiler back-off on real processes (issue 12, item 4): a trainer stand-in that dlopens mimic
// libraries under the profilers' file names (libcupti.so.12, librocprofiler64.so), and one run
// under a launcher whose command name is nsys. The RunManager sees them through the real /proc
// and must stop the process's collectors within one scan period, hold them stopped while a
// profiler comes and goes, and resume one hold-down after it is gone. The collector is a
// recording stand-in: what is checked is when it is opened and closed, not what it reads.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "agent/runs/run_manager.h"
#include "agent/testing/test_util.h"
#include "collectors/collector.h"
#include "common/clock.h"
#include "probes/testing/child_process.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using seqpoint::probes::testing::BuildPath;
using seqpoint::probes::testing::ChildProcess;

namespace {

constexpr int64_t kScanMs = 100;  // runs.profiler_scan_interval_ms of these tests

std::string RunsBuild(const std::string& name) { return BuildPath("agent/runs/" + name); }

// Records when it is opened and closed; End answers "busy" while *busy is set.
struct Recording {
  bool open = false;
  int opens = 0;
  int begins = 0;
  int64_t closed_mono_ns = 0;
  int64_t opened_mono_ns = 0;
  bool busy = false;
};

class RecordingCollector : public seqpoint::collectors::Collector {
 public:
  explicit RecordingCollector(Recording* r) : r_(r) {}
  ~RecordingCollector() override { Close(); }
  std::string_view name() const override { return "counters"; }
  seqpoint::Status Open(const seqpoint::collectors::Target&) override {
    r_->open = true;
    ++r_->opens;
    r_->opened_mono_ns = seqpoint::MonotonicNs();
    return seqpoint::Status::Ok();
  }
  seqpoint::Status Begin() override {
    ++r_->begins;
    return seqpoint::Status::Ok();
  }
  seqpoint::Result<std::vector<seqpoint::collectors::Sample>> End() override {
    if (r_->busy) return seqpoint::collectors::CountersBusy("mimicGetCounters: NVML_ERROR_IN_USE");
    return std::vector<seqpoint::collectors::Sample>{{"counters:x", 1, "count"}};
  }
  void Close() override {
    if (!r_->open) return;
    r_->open = false;
    r_->closed_mono_ns = seqpoint::MonotonicNs();
  }

 private:
  Recording* r_;
};

// A RunManager over a real store, a recording collector, and iterations fed by the test: every
// SL new, so the selector keeps choosing (and the collectors keep being wanted).
struct Rig {
  TempDir dir;
  std::unique_ptr<Store> store;
  Recording rec;
  std::unique_ptr<RunManager> runs;
  uint64_t iter = 0;
  int64_t last_scan_ns = 0;

  explicit Rig(int64_t hold_down_s) {
    auto s = Store::Open(dir.File("state.db"));
    REQUIRE(s.ok());
    store = std::move(*s);
    RunManagerOptions o;
    o.group_by = *ParseRunGroupBy("pid");
    o.selector.budget_count = 1'000'000;
    o.selector.warmup = 0;
    o.selector.max_samples_per_point = 1'000'000;
    o.observer_control_every = 0;  // no controls: every chosen iteration opens the collectors
    o.profiler_hold_down_s = hold_down_s;
    runs = std::make_unique<RunManager>(
        store.get(),
        [this] {
          std::vector<std::unique_ptr<seqpoint::collectors::Collector>> v;
          v.push_back(std::make_unique<RecordingCollector>(&rec));
          return v;
        },
        o);
  }

  // Feeds iterations of `pid` for `ms`, scanning for profilers every kScanMs, until `done`.
  bool Pump(
      pid_t pid, int64_t ms, const std::function<bool()>& done = [] { return false; }) {
    const int64_t end = seqpoint::MonotonicNs() + ms * 1'000'000;
    while (seqpoint::MonotonicNs() < end) {
      const uint64_t t0 = static_cast<uint64_t>(seqpoint::MonotonicNs());
      const uint32_t sl = static_cast<uint32_t>(1 + iter % 4000);
      runs->OnIterationBegin({pid, pid, iter, sl, 1, sl, t0});
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const uint64_t t1 = static_cast<uint64_t>(seqpoint::MonotonicNs());
      runs->OnIterationEnd({pid, pid, iter, sl, 1, sl, t0, t1, true});
      ++iter;
      if (seqpoint::MonotonicNs() - last_scan_ns >= kScanMs * 1'000'000) {
        last_scan_ns = seqpoint::MonotonicNs();
        runs->ScanProfilers();
      }
      if (done()) return true;
    }
    return done();
  }
};

struct Trainer {
  ChildProcess child;
  pid_t pid = 0;
};

// The trainer stand-in, directly or under `launcher` (a path whose basename is the profiler's).
Trainer StartTrainer(const std::string& launcher = "") {
  std::vector<std::string> argv;
  if (!launcher.empty()) argv.push_back(launcher);
  argv.push_back(RunsBuild("profiled_workload"));
  auto child = ChildProcess::Start(argv);
  REQUIRE_MESSAGE(child.ok(), child.status().ToString());
  auto line = child->ReadLine();
  REQUIRE(line.ok());
  REQUIRE(line->rfind("ready ", 0) == 0);
  return Trainer{std::move(*child), static_cast<pid_t>(std::stol(line->substr(6)))};
}

// Sends a command; returns the CLOCK_MONOTONIC time the trainer reports it took effect.
int64_t Command(Trainer& t, const std::string& cmd) {
  REQUIRE(t.child.WriteLine(cmd).ok());
  auto line = t.child.ReadLine();
  REQUIRE(line.ok());
  const size_t sp = line->find(' ');
  REQUIRE_MESSAGE(line->rfind("error", 0) != 0, *line);
  return std::stoll(line->substr(sp + 1));
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

TEST_CASE("agent profiler watch: the profilers' libraries are matched by file name") {
  ProfilerPatterns p;
  CHECK(MatchProfilerLibrary("libcupti.so.12", p) == "libcupti");
  CHECK(MatchProfilerLibrary("libnvperf_host.so", p) == "libnvperf");
  CHECK(MatchProfilerLibrary("libnvperf_target.so", p) == "libnvperf");
  CHECK(MatchProfilerLibrary("librocprofiler64.so.1", p) == "librocprofiler");
  CHECK(MatchProfilerLibrary("librocprofiler-sdk.so.0", p) == "librocprofiler");
  CHECK(MatchProfilerLibrary("librocprofiler-register.so.0", p).empty());  // every HIP process
  CHECK(MatchProfilerLibrary("libcudart.so.12", p).empty());
  CHECK(MatchProfilerLibrary("libc.so.6", p).empty());
  p.libraries = {"rocprofiler-sdk"};
  CHECK(MatchProfilerLibrary("librocprofiler-sdk.so.0", p) == "rocprofiler-sdk");
}

TEST_CASE("agent profiler watch: CUPTI beside libtorch_cuda (kineto's link) is no sighting") {
  TempDir root;
  const std::string cupti =
      "7f00-7f10 r-xp 00000000 08:01 11 /opt/venv/nvidia/cuda_cupti/lib/libcupti.so.12\n";
  const std::string torch = "7e00-7e10 r-xp 00000000 08:01 12 /opt/venv/torch/lib/libtorch_cuda.so\n";
  root.Write("100/maps", cupti);
  root.Write("100/comm", "python3\n");
  root.Write("200/maps", torch + cupti);
  root.Write("200/comm", "python3\n");
  auto alone = FindProfiler(root.path(), 100, ProfilerPatterns{});
  REQUIRE(alone.has_value());
  CHECK(alone->profiler == "libcupti");
  CHECK_FALSE(FindProfiler(root.path(), 200, ProfilerPatterns{}).has_value());
  // Another profiler library still counts beside libtorch_cuda.
  root.Write("300/maps", torch + cupti +
                             "7d00-7d10 r-xp 00000000 08:01 13 /opt/nsight/libnvperf_host.so\n");
  root.Write("300/comm", "python3\n");
  auto nvperf = FindProfiler(root.path(), 300, ProfilerPatterns{});
  REQUIRE(nvperf.has_value());
  CHECK(nvperf->profiler == "libnvperf");
}

TEST_CASE("agent profiler watch: real processes mapping mimic profiler libraries are seen") {
  Trainer t = StartTrainer();
  ProfilerPatterns p;
  CHECK(!FindProfiler("/proc", t.pid, p).has_value());  // a plain process
  Command(t, "load " + RunsBuild("librocprofiler-register.so"));
  CHECK(!FindProfiler("/proc", t.pid, p).has_value());
  Command(t, "unload");
  Command(t, "load " + RunsBuild("libcupti.so.12"));
  auto cupti = FindProfiler("/proc", t.pid, p);
  REQUIRE(cupti.has_value());
  CHECK(cupti->profiler == "libcupti");
  CHECK(cupti->evidence.find("libcupti.so.12") != std::string::npos);
  Command(t, "unload");
  CHECK(!FindProfiler("/proc", t.pid, p).has_value());  // dlclose unmapped it
  Command(t, "load " + RunsBuild("librocprofiler64.so"));
  auto roc = FindProfiler("/proc", t.pid, p);
  REQUIRE(roc.has_value());
  CHECK(roc->profiler == "librocprofiler");
  p.libraries.clear();  // runs.profiler_libraries = []: the site relies on the commands
  CHECK(!FindProfiler("/proc", t.pid, p).has_value());
  // What one scan of one process costs (maps read in full, a few ancestors' comm and exe).
  const ProfilerPatterns defaults;
  for (pid_t pid : {t.pid, getpid()}) {
    const int64_t t0 = seqpoint::MonotonicNs();
    for (int i = 0; i < 200; ++i) (void)FindProfiler("/proc", pid, defaults);
    MESSAGE("one profiler scan of pid " << pid << ": "
                                        << Ms(seqpoint::MonotonicNs() - t0) * 1000 / 200 << " us");
  }
  REQUIRE(t.child.WriteLine("exit").ok());
}

TEST_CASE("agent profiler watch: a process run under nsys is seen through its parent") {
  TempDir dir;
  const std::string nsys = dir.path() + "/nsys";
  std::filesystem::create_symlink(RunsBuild("profiler_launcher"), nsys);
  Trainer t = StartTrainer(nsys);
  auto s = FindProfiler("/proc", t.pid, ProfilerPatterns{});
  REQUIRE(s.has_value());
  CHECK(s->profiler == "nsys");
  CHECK(s->evidence.find("ancestor pid") != std::string::npos);
  ProfilerPatterns none;
  none.commands = {"ncu"};
  CHECK(!FindProfiler("/proc", t.pid, none).has_value());
  REQUIRE(t.child.WriteLine("exit").ok());
}

TEST_CASE("agent profiler back-off: collectors stop when a profiler appears, resume after it") {
  const int64_t hold_down_s = 2;
  Rig rig(hold_down_s);
  Trainer t = StartTrainer();
  rig.runs->OnProcessFound(ProcessInfo{t.pid, 0, "profiled_workload", ""});
  REQUIRE(rig.Pump(t.pid, 5000, [&] { return rig.rec.open; }));

  const int64_t appeared = Command(t, "load " + RunsBuild("libcupti.so.12"));
  REQUIRE(rig.Pump(t.pid, 5000, [&] { return !rig.rec.open; }));
  const int64_t stop_ns = rig.rec.closed_mono_ns - appeared;
  const Backoff* b = rig.runs->backoff().Find(t.pid);
  REQUIRE(b != nullptr);
  CHECK(b->reason == std::string(kBackoffProfiler));
  CHECK(b->profiler == "libcupti");
  CHECK(b->evidence.find("libcupti.so.12") != std::string::npos);
  CHECK(rig.runs->RunBackoffs(rig.runs->runs().begin()->first).size() == 1);
  // Held: no collector opens while the profiler is there.
  const int begins = rig.rec.begins;
  rig.Pump(t.pid, 1000);
  CHECK(rig.rec.begins == begins);
  CHECK(!rig.rec.open);

  const int64_t gone = Command(t, "unload");
  int64_t ended = 0;
  REQUIRE(rig.Pump(t.pid, 10000, [&] {
    if (ended == 0 && rig.runs->backoff().Find(t.pid) == nullptr) ended = seqpoint::MonotonicNs();
    return rig.rec.open;
  }));
  const int64_t resume_ns = ended - gone;
  const int64_t reopen_ns = rig.rec.opened_mono_ns - gone;
  MESSAGE("profiler appeared -> collectors stopped: "
          << Ms(stop_ns) << " ms (scan every " << kScanMs
          << " ms); profiler gone -> back-off ended: " << Ms(resume_ns)
          << " ms, collectors open again: " << Ms(reopen_ns) << " ms (hold-down " << hold_down_s
          << " s)");
  CHECK(stop_ns >= 0);
  CHECK(stop_ns <= 1'000'000'000);  // one scan period, with room for a loaded 2-core VM
  CHECK(resume_ns >= hold_down_s * 1'000'000'000 - kScanMs * 1'000'000);
  CHECK(resume_ns <= hold_down_s * 1'000'000'000 + 1'000'000'000);
  CHECK(rig.runs->backoff().stats().started.at(kBackoffProfiler) == 1);
  REQUIRE(t.child.WriteLine("exit").ok());
}

TEST_CASE(
    "agent profiler back-off: a profiler that comes and goes every second holds one back-off") {
  const int64_t hold_down_s = 2;
  Rig rig(hold_down_s);
  Trainer t = StartTrainer();
  rig.runs->OnProcessFound(ProcessInfo{t.pid, 0, "profiled_workload", ""});
  REQUIRE(rig.Pump(t.pid, 5000, [&] { return rig.rec.open; }));
  const int opens_before = rig.rec.opens;
  // Six visits of 0.5 s, 0.5 s apart: the scan sees it come and go each time.
  for (int visit = 0; visit < 6; ++visit) {
    Command(t, "load " + RunsBuild("librocprofiler64.so"));
    rig.Pump(t.pid, 500);
    Command(t, "unload");
    rig.Pump(t.pid, 500);
    CHECK_MESSAGE(rig.runs->backoff().Find(t.pid) != nullptr, "visit " << visit);
  }
  CHECK(rig.rec.opens == opens_before);  // never reopened between visits
  CHECK(rig.runs->backoff().stats().started.at(kBackoffProfiler) == 1);
  CHECK(rig.runs->backoff().stats().ended == 0);
  REQUIRE(rig.Pump(t.pid, 10000, [&] { return rig.rec.open; }));  // then resumes, once
  CHECK(rig.runs->backoff().stats().ended == 1);
  CHECK(rig.rec.opens == opens_before + 1);
  REQUIRE(t.child.WriteLine("exit").ok());
}

TEST_CASE("agent profiler back-off: a process started under nsys is never measured") {
  TempDir dir;
  const std::string nsys = dir.path() + "/nsys";
  std::filesystem::create_symlink(RunsBuild("profiler_launcher"), nsys);
  Rig rig(2);
  Trainer t = StartTrainer(nsys);
  rig.runs->OnProcessFound(ProcessInfo{t.pid, 0, "profiled_workload", ""});
  rig.Pump(t.pid, 1000);
  CHECK(rig.rec.opens == 0);
  const Backoff* b = rig.runs->backoff().Find(t.pid);
  REQUIRE(b != nullptr);
  CHECK(b->profiler == "nsys");
  REQUIRE(t.child.WriteLine("exit").ok());
  (void)t.child.Wait();
  rig.runs->OnProcessExit(ProcessExit{t.pid, false, 0, std::nullopt});
  CHECK(rig.runs->backoff().Find(t.pid) == nullptr);  // forgotten with the process
}

TEST_CASE("agent profiler back-off: a vendor library's busy answer stops the collectors") {
  Rig rig(1);
  Trainer t = StartTrainer();
  rig.runs->OnProcessFound(ProcessInfo{t.pid, 0, "profiled_workload", ""});
  REQUIRE(rig.Pump(t.pid, 5000, [&] { return rig.rec.open; }));
  rig.rec.busy = true;
  REQUIRE(rig.Pump(t.pid, 5000, [&] { return !rig.rec.open; }));
  const Backoff* b = rig.runs->backoff().Find(t.pid);
  REQUIRE(b != nullptr);
  CHECK(b->reason == std::string(kBackoffCountersBusy));
  CHECK(b->profiler == "counters");
  CHECK(b->evidence.find("NVML_ERROR_IN_USE") != std::string::npos);
  rig.rec.busy = false;  // the tool let go: tried again after the hold-down
  REQUIRE(rig.Pump(t.pid, 5000, [&] { return rig.rec.open; }));
  CHECK(rig.runs->backoff().Find(t.pid) == nullptr);
  REQUIRE(t.child.WriteLine("exit").ok());
}

TEST_CASE("agent profiler back-off: pause closes every collector until resume or its end") {
  Rig rig(1);
  Trainer t = StartTrainer();
  rig.runs->OnProcessFound(ProcessInfo{t.pid, 0, "profiled_workload", ""});
  REQUIRE(rig.Pump(t.pid, 5000, [&] { return rig.rec.open; }));
  rig.runs->PauseCollectors(std::nullopt);
  CHECK(!rig.rec.open);
  const int begins = rig.rec.begins;
  rig.Pump(t.pid, 500);
  CHECK(rig.rec.begins == begins);
  CHECK(rig.runs->ResumeCollectors());
  REQUIRE(rig.Pump(t.pid, 5000, [&] { return rig.rec.open; }));
  CHECK(!rig.runs->ResumeCollectors());  // not paused any more

  const int64_t paused_at = seqpoint::MonotonicNs();
  rig.runs->PauseCollectors(int64_t{600'000'000});
  CHECK(!rig.rec.open);
  REQUIRE(rig.Pump(t.pid, 5000, [&] { return rig.rec.open; }));
  const int64_t resumed = rig.rec.opened_mono_ns - paused_at;
  MESSAGE("pause for 600 ms: collectors open again after " << Ms(resumed) << " ms");
  CHECK(resumed >= 600'000'000);
  // The next scan lifts it for good (and logs it once).
  CHECK(rig.Pump(t.pid, 1000, [&] { return !rig.runs->backoff().pause().paused; }));
  REQUIRE(t.child.WriteLine("exit").ok());
}
