// Energy per iteration from a slow, coarse counter, replayed from a real H100 (issue 22):
// testdata/h100_nvml_energy.csv holds NVML's total energy read back to back, each read
// bracketed by CLOCK_MONOTONIC: every read took over 1 ms (mean 3.9 ms idle, up to 64 ms under
// load) and the value changes every 100 ms. The sampler used to drop every such read, so no
// iteration got energy; now each read is kept with its uncertainty, the 100 ms update period
// is measured at open, and each iteration's error bound is worked out: within it of the GPU's
// power x time, iteration by iteration and summed. The recorded reads come through the clock seam,
// so nothing here is timed, except the last cases, which check that the event loop never waits for
// a read (a source that sleeps the recorded read times, on the reader's thread).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/energy/energy_sampler.h"
#include "agent/testing/test_util.h"
#include "collectors/energy/update_period.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;

namespace {

struct Row {
  uint64_t t0 = 0, t1 = 0;
  double mj = 0, mw = 0;
};

std::vector<Row> Recorded(const std::string& phase) {
  std::ifstream in(SourceDir() + "/agent/energy/testdata/h100_nvml_energy.csv");
  REQUIRE(in.good());
  std::string line;
  std::getline(in, line);
  REQUIRE(line == "phase,t0_ns,t1_ns,energy_mj,power_mw");
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string p, t0, t1, mj, mw;
    std::getline(f, p, ',');
    std::getline(f, t0, ',');
    std::getline(f, t1, ',');
    std::getline(f, mj, ',');
    std::getline(f, mw, ',');
    if (p == phase)
      rows.push_back({std::stoull(t0), std::stoull(t1), std::stod(mj), std::stod(mw)});
  }
  REQUIRE(rows.size() > 200);
  return rows;
}

// The recorded reads through the clock seam: the clock answers a read's recorded t0 and t1,
// the source its recorded value. A sampler that ticks every 50 ms reads a subset of the
// back-to-back reads: the next read is the first recorded one that began at or after next_at.
struct Replay {
  std::vector<Row> rows;
  size_t next = 0;
  bool in_read = false;
  uint64_t next_at = 0;
  uint64_t Clock() {
    if (!in_read) {
      while (next + 1 < rows.size() && rows[next].t0 < next_at) ++next;
      in_read = true;
      return rows[next].t0;
    }
    in_read = false;
    const uint64_t t1 = rows[next].t1;
    if (next + 1 < rows.size()) ++next;
    return t1;
  }
  bool done() const { return next + 1 >= rows.size(); }
  // The energy the GPU drew over [b, e] by its power readings (constant to 0.3% here).
  double TruthUj(uint64_t b, uint64_t e) const {
    double mw = 0;
    int n = 0;
    for (const Row& r : rows) {
      if (r.t1 >= b && r.t0 <= e) mw += r.mw, ++n;
    }
    return mw / n * static_cast<double>(e - b) * 1e-6;  // mW x ns = 1e-6 uJ
  }
};

class ReplaySource : public seqpoint::collectors::EnergySource {
 public:
  explicit ReplaySource(Replay* r) : r_(r) {}
  std::string_view name() const override { return "nvml"; }
  seqpoint::Status Open() override { return seqpoint::Status::Ok(); }
  seqpoint::Result<double> ReadMicrojoules() override { return r_->rows[r_->next].mj * 1e3; }

 private:
  Replay* r_;
};

}  // namespace

TEST_CASE("energy replay: H100 NVML reads, all slow, are kept, short iterations are smeared") {
  for (const std::string phase : {"idle", "load"}) {
    CAPTURE(phase);
    Replay replay{Recorded(phase)};
    auto s = EnergySampler::OpenSource(std::make_unique<ReplaySource>(&replay),
                                       [&] { return replay.Clock(); });
    REQUIRE(s.ok());
    EnergySampler& sampler = **s;
    // The counter's own period, from back-to-back reads at open: 100 ms on this GPU.
    const EnergyCalibration& cal = sampler.stats().calibration;
    REQUIRE(cal.done);
    CHECK(cal.gaps == seqpoint::collectors::UpdatePeriodProbe::kGaps);  // on-time reads only
    CHECK(cal.update_ns >= 90'000'000);
    CHECK(cal.update_ns <= 110'000'000);
    MESSAGE(phase << ": update period " << cal.update_ns * 1e-6 << " ms from " << cal.gaps
                  << " gaps, " << cal.reads << " reads of " << cal.read_ns * 1e-6 << " ms");
    // Sampling every 50 ms over the rest of the recording.
    const uint64_t first = replay.rows[replay.next].t0;
    for (uint64_t t = first; !replay.done(); t += 50'000'000) {
      replay.next_at = t;
      sampler.Sample();
    }
    const EnergySamplerStats& st = sampler.stats();
    CHECK(st.failures == 0);
    CHECK(st.slow_reads == st.reads);  // every read over 1 ms, and every one kept
    CHECK(st.unplaced == 0);
    CHECK(st.reads > 20);
    const uint64_t last = sampler.last_sample_ns();
    // Iterations of 10 ms, like the GRU's: a 100 ms counter cannot tell them apart, so each
    // is smeared over its neighbours; kept and counted, and their sum is exact.
    double short_sum = 0;
    size_t short_tried = 0;
    uint64_t b = first;
    for (; b + 10'000'000 < last; b += 10'000'000, ++short_tried) {
      double relative = 0;
      std::optional<double> uj = sampler.EnergyBetween(b, b + 10'000'000, true, &relative);
      REQUIRE(uj.has_value());
      CHECK(relative > EnergySampler::kMaxRelativeUncertainty);
      short_sum += *uj;
    }
    CHECK(st.smeared == short_tried);
    const double short_truth = replay.TruthUj(first, b);
    double sum_relative = 0;
    REQUIRE(sampler.EnergyBetween(first, b, false, &sum_relative).has_value());
    CHECK(std::fabs(short_sum - short_truth) <= sum_relative * short_truth);
    // Iterations of 1.5 s: within their bound of the GPU's own power x time, not smeared.
    const uint64_t smeared_before = st.smeared, given_before = st.interpolations;
    double worst = 0, rel_sum = 0;
    size_t n = 0;
    for (uint64_t w = first; w + 1'500'000'000 < last; w += 37'000'000, ++n) {
      double relative = 0;
      std::optional<double> uj = sampler.EnergyBetween(w, w + 1'500'000'000, true, &relative);
      REQUIRE(uj.has_value());
      const double truth = replay.TruthUj(w, w + 1'500'000'000);
      worst = std::max(worst, std::fabs(*uj - truth) / truth);
      rel_sum += relative;
      CHECK(std::fabs(*uj - truth) <= relative * truth);
      CHECK(relative <= EnergySampler::kMaxRelativeUncertainty);
    }
    CHECK(n > 10);
    CHECK(st.smeared == smeared_before);
    CHECK(st.interpolations == given_before + n);
    MESSAGE(phase << ": " << short_tried << " iterations of 10 ms, all smeared (bound "
                  << sum_relative * 100 << "% on their sum, error "
                  << std::fabs(short_sum - short_truth) / short_truth * 100 << "%); " << n
                  << " of 1.5 s, worst error " << worst * 100 << "% (bound "
                  << rel_sum / static_cast<double>(n) * 100 << "% on average)");
  }
}

namespace {

// Sleeps each read for the recorded time (real clock), answering the recorded values; notes
// which thread read. `hold`: the next read blocks until released (a hung driver call).
class SleepingSource : public seqpoint::collectors::EnergySource {
 public:
  explicit SleepingSource(std::vector<Row> rows) : rows_(std::move(rows)) {}
  std::string_view name() const override { return "nvml"; }
  seqpoint::Status Open() override { return seqpoint::Status::Ok(); }
  seqpoint::Result<double> ReadMicrojoules() override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !hold_; });
      reader_ = std::this_thread::get_id();
    }
    const Row& r = rows_[i_ % rows_.size()];
    ++i_;
    std::this_thread::sleep_for(std::chrono::nanoseconds(r.t1 - r.t0));
    return r.mj * 1e3 + static_cast<double>(i_ / rows_.size()) * 1e9;  // never decreasing
  }
  void Hold(bool on) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold_ = on;
    }
    cv_.notify_all();
  }
  std::thread::id reader() {
    std::lock_guard<std::mutex> lock(mu_);
    return reader_;
  }

 private:
  std::vector<Row> rows_;
  size_t i_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  std::thread::id reader_;
};

}  // namespace

TEST_CASE("energy replay: the loop never waits for a read (recorded 4 ms reads, own thread)") {
  // Before: reads on the caller's thread, as the daemon's loop did. After: the reader's thread.
  double loop_ms[2] = {0, 0}, read_ms[2] = {0, 0};
  const int kTicks = 40;
  for (bool own : {false, true}) {
    CAPTURE(own);
    auto source = std::make_unique<SleepingSource>(Recorded("idle"));
    SleepingSource* src = source.get();
    auto s = EnergySampler::OpenSource(std::move(source), MonotonicNowNs, own);
    REQUIRE(s.ok());
    EnergySampler& sampler = **s;
    // Wait out the calibration (about 0.5 s of back-to-back reads: five 100 ms updates).
    REQUIRE(WaitFor([&] {
      sampler.Sample();
      return sampler.stats().reads > 0;
    }));
    const double loop0 = sampler.stats().loop_ns, read0 = sampler.stats().read_cost_us;
    const uint64_t reads0 = sampler.stats().reads;
    for (int i = 0; i < kTicks; ++i) {
      sampler.Sample();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the loop's other work
    }
    REQUIRE(WaitFor([&] {  // the reads asked for are all filed (liveness only)
      sampler.Sample();
      return sampler.stats().reads >= reads0 + kTicks / 2;
    }));
    CHECK((src->reader() == std::this_thread::get_id()) == !own);
    const uint64_t reads = sampler.stats().reads - reads0;
    loop_ms[own] = (sampler.stats().loop_ns - loop0) * 1e-6 / static_cast<double>(reads);
    read_ms[own] = (sampler.stats().read_cost_us - read0) * 1e-3 / static_cast<double>(reads);
  }
  MESSAGE("per read: on the loop " << read_ms[0] << " ms read, loop " << loop_ms[0]
                                   << " ms; own thread " << read_ms[1] << " ms read, loop "
                                   << loop_ms[1] << " ms");
}

TEST_CASE("energy replay: sampling goes on while the period is measured (own thread)") {
  // The recorded H100 reads, slept: the measurement needs four gaps between changes of a 100 ms
  // counter, half a second at least (on a loaded node up to its 2 s cap). The loop samples all
  // along; the reads that answered it are filed once the period places them, so an iteration
  // that began during the measurement has a sample before its start.
  auto source = std::make_unique<SleepingSource>(Recorded("idle"));
  auto s = EnergySampler::OpenSource(std::move(source), MonotonicNowNs, /*own_thread=*/true);
  REQUIRE(s.ok());
  EnergySampler& sampler = **s;
  const uint64_t began = MonotonicNowNs();  // an iteration beginning with the measurement
  sampler.Sample();
  CHECK(sampler.stats().reads == 0);  // held: no period to place it by yet
  REQUIRE(WaitFor([&] {
    sampler.Sample();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return sampler.stats().calibration.done;
  }));
  const EnergyCalibration& cal = sampler.stats().calibration;
  const uint64_t measured_for = MonotonicNowNs() - began;
  // Filed together with the period: the read that answered the first Sample (one of the first
  // of the measurement's dozens), then the measurement's last. Before, only the last one: the
  // iterations of the measurement's half second had no sample before their start.
  const uint64_t filed = sampler.stats().reads;
  CHECK(filed >= 2);
  // From the first of them on, windows have energy: the measurement spans four updates or more
  // (390 ms and up), so a window of the 200 ms before its last read is covered.
  const uint64_t last = sampler.last_sample_ns();
  CHECK(sampler.EnergyBetween(last - 200'000'000, last).has_value());
  MESSAGE("measured " << cal.update_ns * 1e-6 << " ms in " << measured_for * 1e-6 << " ms ("
                      << cal.reads << " reads, " << cal.gaps << " gaps); " << filed
                      << " samples filed with it");
}

TEST_CASE("energy replay: a hung read is never queued behind, the tick is counted as skipped") {
  auto source = std::make_unique<SleepingSource>(Recorded("idle"));
  SleepingSource* src = source.get();
  auto s = EnergySampler::OpenSource(std::move(source), MonotonicNowNs, /*own_thread=*/true);
  REQUIRE(s.ok());
  EnergySampler& sampler = **s;
  struct Release {  // before the sampler joins its reader, whatever fails
    SleepingSource* src;
    ~Release() { src->Hold(false); }
  } release{src};
  REQUIRE(WaitFor([&] {
    sampler.Sample();
    return sampler.stats().reads > 0;
  }));
  src->Hold(true);
  // Let the reader take the request and block in the "driver".
  const uint64_t skipped0 = sampler.stats().skipped;
  sampler.Sample();
  REQUIRE(WaitFor([&] {
    sampler.Sample();  // returns at once: the read is in flight
    return sampler.stats().skipped > skipped0 + 2;
  }));
  const uint64_t reads = sampler.stats().reads;
  src->Hold(false);
  REQUIRE(WaitFor([&] {
    sampler.Sample();
    return sampler.stats().reads > reads;
  }));
  CHECK(sampler.stats().failures == 0);
}

namespace {

// A counter at 100 W whose reads take `read_ns` of the test's clock.
class TimedSource : public seqpoint::collectors::EnergySource {
 public:
  explicit TimedSource(uint64_t* now) : now_(now) {}
  std::string_view name() const override { return "timed"; }
  seqpoint::Status Open() override { return seqpoint::Status::Ok(); }
  seqpoint::Result<double> ReadMicrojoules() override {
    const double uj = 100.0 * static_cast<double>(*now_) * 1e-3;  // 100 W = 0.1 uJ/ns
    *now_ += read_ns;
    return uj;
  }
  uint64_t read_ns = 0;

 private:
  uint64_t* now_;
};

}  // namespace

TEST_CASE(
    "energy sampler: a slow read is kept with its bracket, one longer than an update is not") {
  uint64_t now = 1'000'000'000;
  auto source = std::make_unique<TimedSource>(&now);
  TimedSource* src = source.get();
  // Instant reads at open: the counter moves only with the clock, so no period is measured.
  auto s = EnergySampler::OpenSource(std::move(source), [&] { return now; });
  REQUIRE(s.ok());
  EnergySampler& sampler = **s;
  CHECK(sampler.stats().calibration.update_ns == 0);
  auto tick = [&](uint64_t read_ns) {
    now += 50'000'000;
    src->read_ns = read_ns;
    sampler.Sample();
  };
  tick(0);
  tick(800'000);  // slow-ish, under 1 ms: kept
  tick(0);
  tick(4'000'000);  // 4 ms, longer than 1 ms and than the (unmeasured) update period: left out
  tick(0);
  CHECK(sampler.stats().slow_reads == 1);
  CHECK(sampler.stats().unplaced == 1);
  CHECK(sampler.stats().reads == 6);  // the calibration's last read and five ticks
  // A window between instant reads: exact, no uncertainty.
  double relative = 1;
  const uint64_t t0 = 1'000'000'000;  // the first sample
  auto e = sampler.EnergyBetween(t0, t0 + 50'000'000, true, &relative);
  REQUIRE(e.has_value());
  CHECK(relative == 0);
  CHECK(*e == doctest::Approx(100.0 * 50'000'000 * 1e-3));
  // Across the 0.8 ms read (its value is the counter's at its start, placed at its middle):
  // off by less than its half-width, weighted by its interpolation coefficients, over the
  // window, which is what the bound says.
  e = sampler.EnergyBetween(t0 + 60'000'000, t0 + 110'000'000, true, &relative);
  REQUIRE(e.has_value());
  const double truth = 100.0 * 50'000'000 * 1e-3;
  CHECK(relative > 0);
  CHECK(relative < 400'000.0 / 50'000'000);
  // At the bound exactly: the value is the counter's at the very edge of the read's bracket.
  CHECK(std::fabs(*e - truth) <= relative * truth + 1.0);
}
