// The GPU window rule wired into MeasurementController (measurement_gpu_sync.cpp): the CPU
// collectors end at the end marker; the GPU collector (the real NVML collector on the NVML test
// double, which replays a real A100's values) ends when the process's sync says so, or its
// values are flagged and left out, counted by reason. The sync marks and the timer come from a
// scripted source (the real sync probes on the real libcudart: ebpf_source_sync_test.cpp).
#include <doctest/doctest.h>
#include <unistd.h>

#include <deque>

#include "agent/measure/measurement_controller.h"
#include "agent/runs/run_tracker.h"
#include "collectors/nvml/nvml_collector.h"
#include "common/clock.h"

namespace seqpoint::daemon {
namespace {

using collectors::Sample;

// The source's side of the seam: the process's latest sync as the test scripts it, and the
// io_context's timer as a queue the test fires.
class ScriptedSource : public IterationSource {
 public:
  std::string_view name() const override { return "scripted"; }
  Status Start(IterationSink*) override { return Status::Ok(); }
  void Stop() override {}
  void SetBeginHooks(pid_t, bool) override {}
  SourceStats stats() const override { return {}; }
  Result<collectors::SyncReading> GpuSyncMark(pid_t) override {
    if (!probe) return Unavailable("the process maps no CUDA runtime");
    return mark;
  }
  bool CallAfter(int64_t delay_ns, std::function<void()> fn) override {
    CHECK(delay_ns > 0);
    timers.push_back(std::move(fn));
    return true;
  }
  // Fires the timers due now (each check schedules the next while a window waits).
  void FireTimers() {
    std::deque<std::function<void()>> due;
    due.swap(timers);
    for (auto& fn : due) fn();
  }

  bool probe = true;
  collectors::SyncReading mark;
  std::deque<std::function<void()>> timers;
};

// The NVML collector, device-wide on the test double (it replays an A100: energy +6.703 J
// per read), under the name the rule knows.
class FakeNvml : public collectors::Collector {
 public:
  std::string_view name() const override { return "nvml"; }
  Status Open(const collectors::Target&) override { return inner_.Open({0, ""}); }
  Status Begin() override { return inner_.Begin(); }
  Result<std::vector<Sample>> End() override { return inner_.End(); }
  void Close() override { inner_.Close(); }

 private:
  collectors::NvmlCollector inner_{[] {
    collectors::NvmlOptions o;
    o.library = SEQPOINT_FAKE_NVML_PATH;
    return o;
  }()};
};

// A CPU-side collector that notes when it was ended (on the fake clock).
class CpuCollector : public collectors::Collector {
 public:
  explicit CpuCollector(std::vector<int64_t>* ends) : ends_(ends) {}
  std::string_view name() const override { return "cpu"; }
  Status Open(const collectors::Target&) override { return Status::Ok(); }
  Status Begin() override { return Status::Ok(); }
  Result<std::vector<Sample>> End() override {
    ends_->push_back(MonotonicNs());
    return std::vector<Sample>{{"cpu:task-clock", 1e6, "ns"}};
  }
  void Close() override {}

 private:
  std::vector<int64_t>* ends_;
};

bool HasGpu(const std::vector<Sample>& v) {
  for (const Sample& s : v) {
    if (s.name.rfind("nvml:", 0) == 0) return true;
  }
  return false;
}

struct Fixture {
  explicit Fixture(MeasureOptions options = {})
      : measure(
            &registry,
            [this] {
              std::vector<std::unique_ptr<collectors::Collector>> c;
              c.push_back(std::make_unique<CpuCollector>(&cpu_ends));
              c.push_back(std::make_unique<FakeNvml>());
              return c;
            },
            std::move(options)) {
    measure.set_source(&source);
    measure.set_on_late_values(
        [this](pid_t p, int64_t run, uint64_t iter, const std::vector<Sample>& v) {
          CHECK(p == pid);
          CHECK(run == 1);
          late_iter = iter;
          late = v;
          return tracker->AddLateValues(p, iter, v);
        });
    RunRecord r;
    r.id = 1;
    r.key = "k";
    selector::OnlineOptions o;
    o.warmup = 0;
    o.budget_count = 50;
    auto t = RunTracker::Create(r, o);
    REQUIRE_MESSAGE(t.ok(), t.status().ToString());
    tracker = std::move(*t);
    tracker->set_control_every(0);
    registry.Add(pid, 0, 1);
  }
  // Measures iteration `iter` (SL 128) from now to `len_ns` later: returns what its end gave.
  MeasurementController::Measured Measure(uint64_t iter, int64_t len_ns, bool* measured) {
    Proc& proc = *registry.Find(pid);
    const selector::Decision d = tracker->Decide(pid, iter, 128, 1, 128);
    REQUIRE(d.measure);
    const uint64_t begin = static_cast<uint64_t>(MonotonicNs());
    measure.StartCollectors(pid, proc, *tracker, iter, d.group);
    clock.Advance(len_ns);
    end_ns = MonotonicNs();
    auto m = measure.EndIteration(pid, proc, iter, static_cast<uint64_t>(end_ns), measured);
    tracker->Complete(pid, iter, 128, 1, 128, begin, static_cast<uint64_t>(end_ns), m.values, {},
                      m.groups);
    return m;
  }
  // The GPU rows the tracker stored for its measured iterations.
  size_t StoredGpuRows() {
    size_t n = 0;
    for (const auto& row : tracker->TakeNewMeasurements()) n += row.metric.rfind("nvml:", 0) == 0;
    return n;
  }

  FakeClock clock;
  const pid_t pid = getpid();
  ProcessRegistry registry;
  ScriptedSource source;
  std::vector<int64_t> cpu_ends;
  MeasurementController measure;
  std::unique_ptr<RunTracker> tracker;
  int64_t end_ns = 0;
  std::optional<uint64_t> late_iter;
  std::vector<Sample> late;
};

TEST_CASE("gpu window: a sync in the window's tail closes it at the end, values kept") {
  Fixture f;
  f.source.mark = {MonotonicNs() + 99'000'000, 7};  // loss.item() 1 ms before the end marker
  bool measured = false;
  auto m = f.Measure(3, 100'000'000, &measured);
  REQUIRE(measured);
  CHECK(HasGpu(m.values));
  CHECK(f.cpu_ends == std::vector<int64_t>{f.end_ns});
  CHECK(f.measure.gpu_windows_waiting() == 0);
  CHECK(f.measure.windows().gpu().closed_at_end == 1);
  CHECK(f.measure.windows().gpu().left_out() == 0);
  CHECK(f.StoredGpuRows() > 0);
}

TEST_CASE("gpu window: closed at the next sync, read then and handed over late") {
  Fixture f;
  f.source.mark = {MonotonicNs() - 50'000'000, 4};  // the last sync came before this window
  bool measured = false;
  auto m = f.Measure(3, 100'000'000, &measured);
  REQUIRE(measured);
  // The CPU collector ended at the end marker; the GPU values wait.
  CHECK(f.cpu_ends == std::vector<int64_t>{f.end_ns});
  CHECK_FALSE(HasGpu(m.values));
  CHECK(f.measure.gpu_windows_waiting() == 1);
  REQUIRE(f.source.timers.size() == 1);
  f.clock.Advance(2'000'000);
  f.source.FireTimers();  // no sync yet: still waiting, checked again
  CHECK(f.measure.gpu_windows_waiting() == 1);
  CHECK_FALSE(f.late_iter);
  // The next step's loss.item() returns 30 ms after the end.
  f.source.mark = {f.end_ns + 30'000'000, 5};
  f.clock.Advance(29'000'000);
  f.source.FireTimers();
  CHECK(f.measure.gpu_windows_waiting() == 0);
  REQUIRE(f.late_iter);
  CHECK(*f.late_iter == 3);
  CHECK(HasGpu(f.late));
  CHECK(f.cpu_ends.size() == 1);  // the CPU collector was not ended again
  const GpuWindowCounts& g = f.measure.windows().gpu();
  CHECK(g.closed_at_sync == 1);
  CHECK(g.lag_ns_max == 30'000'000);
  CHECK(g.left_out() == 0);
  CHECK(f.StoredGpuRows() > 0);  // added to iteration 3 in the tracker
}

TEST_CASE("gpu window: no sync within 1 s: flagged and left out, never recorded") {
  Fixture f;
  f.source.mark = {MonotonicNs() - 50'000'000, 4};
  bool measured = false;
  auto m = f.Measure(3, 100'000'000, &measured);
  REQUIRE(measured);
  CHECK_FALSE(HasGpu(m.values));
  for (int i = 0; i < 600 && f.measure.gpu_windows_waiting() > 0; ++i) {
    f.clock.Advance(2'000'000);
    f.source.FireTimers();
  }
  CHECK(f.measure.gpu_windows_waiting() == 0);
  CHECK(f.source.timers.empty());  // no check left running
  CHECK_FALSE(f.late_iter);
  const GpuWindowCounts& g = f.measure.windows().gpu();
  CHECK(g.not_closed == 1);
  CHECK(g.kept() == 0);
  CHECK(g.last_flag.find("window not closed by a sync") != std::string::npos);
  CHECK(g.last_flag.find("1000 ms") != std::string::npos);
  CHECK(f.StoredGpuRows() == 0);
  // A sync past the bound does not close it after the fact.
  f.source.mark = {f.end_ns + 1'500'000'000, 5};
  f.measure.CheckGpuWindows();
  CHECK_FALSE(f.late_iter);
  // Counted in /metrics.
  bool found = false;
  for (const MetricFamily& fam : f.measure.windows().Families()) {
    if (fam.name != "seqpoint_gpu_windows_total") continue;
    found = true;
  }
  CHECK(found);
}

TEST_CASE("gpu window: a process with no sync probe has its GPU values left out, said why") {
  Fixture f;
  f.source.probe = false;
  bool measured = false;
  auto m = f.Measure(3, 100'000'000, &measured);
  REQUIRE(measured);
  CHECK_FALSE(HasGpu(m.values));
  CHECK(m.values.size() == 1);  // the CPU collector's value is kept
  CHECK(f.measure.gpu_windows_waiting() == 0);
  CHECK(f.measure.windows().gpu().no_sync_probe == 1);
  CHECK(f.measure.windows().gpu().last_flag.find("maps no CUDA runtime") != std::string::npos);
  CHECK(f.StoredGpuRows() == 0);
}

TEST_CASE("gpu window: the next measured window before any sync cuts the waiting one short") {
  Fixture f;
  f.source.mark = {MonotonicNs() - 50'000'000, 4};
  bool measured = false;
  (void)f.Measure(3, 100'000'000, &measured);
  REQUIRE(f.measure.gpu_windows_waiting() == 1);
  f.clock.Advance(1'000'000);
  auto m = f.Measure(4, 100'000'000, &measured);  // begins while 3's GPU window waits
  CHECK(f.measure.windows().gpu().cut_short == 1);
  CHECK_FALSE(f.late_iter);
  CHECK(f.measure.gpu_windows_waiting() == 1);  // 4's own window
}

TEST_CASE("gpu window: the tail and the bound are the configured ones") {
  // runs.gpu_sync_tail_ms = 0, runs.gpu_sync_bound_ms = 50 (Daemon::RunOptions makes these).
  MeasureOptions o;
  o.gpu_sync.tail_ns = 0;
  o.gpu_sync.bound_ns = 50'000'000;
  Fixture f(o);
  f.source.mark = {MonotonicNs() + 99'000'000, 7};  // 1 ms before the end: not in a 0 ms tail
  bool measured = false;
  auto m = f.Measure(3, 100'000'000, &measured);
  REQUIRE(measured);
  CHECK_FALSE(HasGpu(m.values));
  CHECK(f.measure.gpu_windows_waiting() == 1);
  // A sync 80 ms after the end would close it under the default 1 s bound; not under 50 ms.
  f.clock.Advance(80'000'000);
  f.source.mark = {f.end_ns + 80'000'000, 8};
  f.source.FireTimers();
  CHECK(f.measure.gpu_windows_waiting() == 0);
  CHECK_FALSE(f.late_iter);
  const GpuWindowCounts& g = f.measure.windows().gpu();
  CHECK(g.not_closed == 1);
  CHECK(g.kept() == 0);
  CHECK(g.last_flag.find("50 ms") != std::string::npos);
  CHECK(f.StoredGpuRows() == 0);
}

}  // namespace
}  // namespace seqpoint::daemon
