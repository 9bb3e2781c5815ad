// Which windows the NVML energy counter can give the energy of (nvml_energy_window.h), on the
// reads recorded on a real H100 80GB HBM3 (driver 580.159.04) by bench/gpu/nvml_record.py:
// testdata/h100_energy_reads.csv, back-to-back reads idle and under load.
#include "collectors/nvml/nvml_energy_window.h"

#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "collectors/nvml/nvml_collector.h"
#include "common/clock.h"

namespace seqpoint::collectors {
namespace {

constexpr int64_t kMs = 1'000'000;

std::vector<EnergyRead> Recorded(const std::string& phase) {
  std::ifstream in(std::string(SEQPOINT_NVML_TESTDATA) + "/h100_energy_reads.csv");
  REQUIRE(in.good());
  std::vector<EnergyRead> out;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string ph, t0, t1, mj;
    std::getline(ss, ph, ',');
    std::getline(ss, t0, ',');
    std::getline(ss, t1, ',');
    std::getline(ss, mj, ',');
    if (ph == phase) out.push_back({std::stoll(t0), std::stoll(t1), std::stoull(mj)});
  }
  return out;
}

}  // namespace

TEST_CASE("nvml energy: the H100's update period from its recorded back-to-back reads") {
  for (const char* phase : {"idle", "load"}) {
    INFO(phase);
    const std::vector<EnergyRead> reads = Recorded(phase);
    REQUIRE(reads.size() > 100);
    // Every start point in the recording: the probe at open may begin at any phase of a step.
    int probes = 0;
    for (size_t start = 0; start + 100 < reads.size(); start += 7) {
      EnergyUpdateProbe p;
      size_t i = start;
      while (i < reads.size() && !p.Add(reads[i])) ++i;
      if (!p.done()) break;
      REQUIRE(p.period_ns());
      // Measured on the device: gaps 97-103 ms idle, 67-127 ms under load; a mean over two.
      CHECK(*p.period_ns() >= (std::string(phase) == "idle" ? 95 : 75) * kMs);
      CHECK(*p.period_ns() <= (std::string(phase) == "idle" ? 105 : 120) * kMs);
      ++probes;
    }
    CHECK(probes > 10);
  }
}

TEST_CASE("nvml energy: windows shorter than 10 updates are left out, with the reason") {
  // The first H100 run's windows were 7-36 ms against a 100 ms counter: all left out.
  EnergyUpdatePeriod period;
  period.period_ns = 100 * kMs;
  period.reads = 41;
  period.spent_ns = 260 * kMs;
  EnergyWindowRule rule(period);
  REQUIRE(rule.min_window_ns() == 1000 * kMs);
  CHECK(rule.ReadAtBegin());  // nothing seen yet
  CHECK(rule.WhyLeftOut(12 * kMs) ==
        "window 12.0 ms shorter than 10 updates of the energy counter (100.0 ms each): its energy "
        "is not known to within 20%");
  CHECK(rule.WhyLeftOut(1000 * kMs).empty());
  for (int i = 0; i < 20; ++i) rule.Saw(30 * kMs);
  CHECK_FALSE(rule.ReadAtBegin());  // every recent window far too short: no read at Begin
  rule.Saw(600 * kMs);              // one near the bar: the next may reach it
  CHECK(rule.ReadAtBegin());
  CHECK(rule.Describe().find("energy counter updates every 100.0 ms") != std::string::npos);
  CHECK(rule.Describe().find("energy kept over windows of 1000.0 ms or more") != std::string::npos);

  EnergyWindowRule unknown(EnergyUpdatePeriod{std::nullopt,
                                              "the energy counter changed 0 time(s)"
                                              " in 2000 reads over 1500.0 ms at open: "
                                              "its update period is unknown"});
  CHECK_FALSE(unknown.ReadAtBegin());
  CHECK(unknown.WhyLeftOut(10'000 * kMs).find("update period is unknown") != std::string::npos);
}

TEST_CASE("nvml energy: a failed read at open leaves the period unknown with its reason") {
  int calls = 0;
  EnergyUpdatePeriod p = MeasureEnergyUpdatePeriod(
      [&]() -> Result<uint64_t> {
        if (++calls > 2) return Unsupported("nvmlDeviceGetTotalEnergyConsumption: Not Supported");
        return uint64_t{5};
      },
      [] { return int64_t{0}; }, 0);
  CHECK_FALSE(p.period_ns);
  CHECK(p.reads == 3);
  CHECK(p.why_not.find("could not be measured: nvmlDeviceGetTotalEnergyConsumption: Not "
                       "Supported") != std::string::npos);
  // A counter that never moves: the probe gives up at its read cap, never loops forever.
  EnergyUpdatePeriod still = MeasureEnergyUpdatePeriod([] { return Result<uint64_t>(uint64_t{7}); },
                                                       [] { return int64_t{0}; }, 0);
  CHECK_FALSE(still.period_ns);
  CHECK(still.reads == EnergyUpdateProbe::kProbeMaxReads);
}

// The fake NVML replays the H100's recorded counter in real time (its 100 ms steps): the
// collector measures the period at open, leaves a short window's energy out and names why, and
// keeps a window of 10 updates or more within a step of what the recorded power gives.
TEST_CASE("nvml energy: the recorded H100 counter through the collector") {
  const std::string csv = std::string(SEQPOINT_NVML_TESTDATA) + "/h100_energy_reads.csv";
  setenv("FAKE_NVML_ENERGY_REPLAY", csv.c_str(), 1);
  NvmlOptions o;
  o.library = SEQPOINT_FAKE_NVML_PATH;
  NvmlCollector nvml(o);
  REQUIRE(nvml.Open({0, ""}).ok());
  unsetenv("FAKE_NVML_ENERGY_REPLAY");
  INFO(nvml.Describe());
  // ~100 ms measured (a loaded test machine may stretch the reads' brackets: loose bounds).
  CHECK(nvml.Describe().find("energy counter updates every ") != std::string::npos);
  CHECK(nvml.Describe().find("energy kept over windows of ") != std::string::npos);

  auto window = [&](int64_t sleep_ms, int64_t* took_ns) {
    REQUIRE(nvml.Begin().ok());
    const int64_t t0 = MonotonicNs();
    struct timespec ts {
      static_cast<time_t>(sleep_ms / 1000), (sleep_ms % 1000) * kMs
    };
    nanosleep(&ts, nullptr);
    auto r = nvml.End();
    *took_ns = MonotonicNs() - t0;
    REQUIRE(r.ok());
    double energy = -1;
    for (const Sample& s : *r) {
      if (s.name == "nvml:gpu0:energy") energy = s.value;
    }
    return energy;
  };
  int64_t took = 0;
  const double short_uj = window(10, &took);
  if (took < 900 * kMs) {  // not stretched past the bar by a loaded machine
    CHECK(short_uj < 0);
    CHECK(nvml.warnings().find("nvml:gpu0:energy: window ") != std::string::npos);
    CHECK(nvml.warnings().find("shorter than 10 updates of the energy counter") !=
          std::string::npos);
  }
  // After one short window the next is still read at its start (the rule is still learning).
  double long_uj = window(1300, &took);
  REQUIRE(long_uj >= 0);
  // The recording: ~7.2 J a step every ~100 ms (71-75 W idle): within two steps of the power.
  const double steps = static_cast<double>(took) / (100.0 * kMs);
  CHECK(long_uj >= (steps - 2) * 6.9e6);
  CHECK(long_uj <= (steps + 2) * 7.7e6);
}

}  // namespace seqpoint::collectors

namespace seqpoint::collectors {

// On a real NVIDIA GPU (a device machine; skipped here, where no driver is installed): the
// period measured at open, short windows left out with no energy read after the first 16, and a
// long window's energy against the power NVML reads at its end.
TEST_CASE("nvml energy: on a real NVIDIA GPU, the period, short windows and a long one") {
  NvmlCollector nvml{NvmlOptions{}};
  const auto t_open = std::chrono::steady_clock::now();
  const Status opened = nvml.Open({0, "0"});
  if (IsAbsent(opened)) {
    MESSAGE("skipped: no NVIDIA GPU and driver here: " << opened.message());
    return;
  }
  REQUIRE_MESSAGE(opened.ok(), opened.ToString());
  const double open_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_open).count();
  MESSAGE("open " << open_ms << " ms: " << nvml.Describe());
  REQUIRE(nvml.Describe().find("energy counter updates every ") != std::string::npos);
  auto sleep_ms = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  struct Window {
    double cost_ms = 0, energy_uj = -1, power_w = 0, length_ms = 0;
  };
  auto window = [&](int ms) {
    Window w;
    const auto a = std::chrono::steady_clock::now();
    REQUIRE(nvml.Begin().ok());
    const auto b = std::chrono::steady_clock::now();
    sleep_ms(ms);
    const auto c = std::chrono::steady_clock::now();
    auto r = nvml.End();
    const auto d = std::chrono::steady_clock::now();
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    w.cost_ms = std::chrono::duration<double, std::milli>((b - a) + (d - c)).count();
    w.length_ms = std::chrono::duration<double, std::milli>(c - a).count();
    for (const Sample& s : *r) {
      if (s.name == "nvml:gpu0:energy") w.energy_uj = s.value;
      if (s.name == "nvml:gpu0:power") w.power_w = s.value;
    }
    return w;
  };
  double read_cost = 0, skip_cost = 0;
  for (int i = 0; i < 24; ++i) {
    const Window w = window(20);
    CHECK(w.energy_uj < 0);  // 20 ms against a counter that moves every ~100 ms: left out
    (i < 16 ? read_cost : skip_cost) += w.cost_ms / (i < 16 ? 16 : 8);
  }
  MESSAGE("cost per 20 ms window: " << read_cost << " ms while the energy counter is read, "
                                    << skip_cost
                                    << " ms once skipped; warnings: " << nvml.warnings());
  const Window skipped = window(1500);  // after 16 short windows: not read at its start
  CHECK(skipped.energy_uj < 0);
  CHECK(nvml.warnings().find("not read at the window's start") != std::string::npos);
  const Window kept = window(1500);
  REQUIRE(kept.energy_uj > 0);
  const double expected = kept.power_w * kept.length_ms * 1e3;  // W x ms -> uJ
  MESSAGE("1.5 s window: " << kept.energy_uj * 1e-6 << " J, power " << kept.power_w << " W x "
                           << kept.length_ms << " ms = " << expected * 1e-6 << " J");
  CHECK(kept.energy_uj == doctest::Approx(expected).epsilon(0.35));
}

}  // namespace seqpoint::collectors
