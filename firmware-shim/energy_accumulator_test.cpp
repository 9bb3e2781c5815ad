#include "firmware-shim/energy_accumulator.h"

#include <doctest/doctest.h>

namespace seqpoint::firmware {
namespace {

constexpr double kUnit = 1.0 / 65536.0;  // gpu_metrics energy_accumulator: 15.259 uJ

TEST_CASE("energy: the first reading is the baseline, later ones add their deltas") {
  EnergyAccumulator acc(64, kUnit);
  auto u = acc.Add(1'000'000);
  CHECK(u.kind == EnergyAccumulator::Kind::kFirst);
  CHECK_FALSE(u.delta_joules.has_value());
  CHECK(acc.total_joules() == 0.0);
  u = acc.Add(1'000'000 + 65536 * 10);
  CHECK(u.kind == EnergyAccumulator::Kind::kIncreased);
  CHECK(*u.delta_joules == doctest::Approx(10.0));
  u = acc.Add(1'000'000 + 65536 * 10);  // no energy used between two reads
  CHECK(*u.delta_joules == 0.0);
  CHECK(acc.total_joules() == doctest::Approx(10.0));
}

TEST_CASE("energy: a 32-bit counter (gpu_metrics_v1_0) wraps without losing energy") {
  EnergyAccumulator acc(32, kUnit);
  acc.Add(0xFFFF0000u);           // 65535 J into the 65536 J range
  auto u = acc.Add(0x00010000u);  // wrapped: 0x10000 + 0x10000 counts = 2 J
  CHECK(u.kind == EnergyAccumulator::Kind::kWrapped);
  CHECK(*u.delta_joules == doctest::Approx(2.0));
  CHECK(acc.wraps() == 1);
  // Several wraps in a row keep the total monotonic and exact.
  uint32_t raw = 0x00010000u;
  double expected = 2.0;
  for (int i = 0; i < 100; ++i) {
    raw += 0x40000000u;  // a quarter of the range = 16384 J, wraps every 4th step
    acc.Add(raw);
    expected += 16384.0;
  }
  CHECK(acc.total_joules() == doctest::Approx(expected));
  CHECK(acc.wraps() >= 24);
  CHECK(acc.resets() == 0);
}

TEST_CASE("energy: a large drop is a reset, not a wrap: no energy is invented") {
  EnergyAccumulator acc(32, kUnit);
  acc.Add(0x10000000u);
  acc.Add(0x20000000u);           // +4096 J
  auto u = acc.Add(0x00000100u);  // driver reload: counter restarted near zero
  CHECK(u.kind == EnergyAccumulator::Kind::kReset);
  CHECK_FALSE(u.delta_joules.has_value());
  CHECK(acc.resets() == 1);
  CHECK(acc.total_joules() == doctest::Approx(4096.0));
  u = acc.Add(0x00010100u);  // counting resumes from the new baseline
  CHECK(*u.delta_joules == doctest::Approx(1.0));
  CHECK(acc.total_joules() == doctest::Approx(4097.0));
}

TEST_CASE("energy: a 64-bit counter never wraps, every decrease is a reset") {
  EnergyAccumulator acc(64, kUnit);
  acc.Add(~uint64_t{0} - 10);
  auto u = acc.Add(5);
  CHECK(u.kind == EnergyAccumulator::Kind::kReset);
  CHECK(acc.total_joules() == 0.0);
}

TEST_CASE("energy: microjoule counters of hwmon energy1_input") {
  EnergyAccumulator acc(64, 1e-6);
  acc.Add(123'456'789);
  auto u = acc.Add(124'456'789);
  CHECK(*u.delta_joules == doctest::Approx(1.0));
}

TEST_CASE("energy: bits beyond the counter width are ignored") {
  EnergyAccumulator acc(32, 1.0);
  acc.Add(0x1'0000'0005ull);  // masked to 5
  auto u = acc.Add(7);
  CHECK(*u.delta_joules == 2.0);
}

}  // namespace
}  // namespace seqpoint::firmware
