// Energy on every iteration: a node-level cumulative energy counter (collectors/energy: the
// gpu_metrics accumulator, ROCm SMI, NVML or RAPL, in the order of collectors.energy.sources)
// sampled on the daemon's io_context every runs.energy_sample_interval_ms into a ring of
// (CLOCK_MONOTONIC ns, uJ) samples. An iteration's energy is the counter interpolated linearly
// at its end timestamp minus the same at its begin timestamp, both probe timestamps
// (bpf_ktime_get_ns is CLOCK_MONOTONIC). Reading the counter when the daemon sees the end
// record would be wrong: end records arrive batched, up to probes.poll_interval_ms late.
//
// Properties:
//  - Exact sums: interpolation is a function of time, so the energies of contiguous iterations
//    telescope to counter(last end) - counter(first begin).
//  - Resolution: an interpolated value is exact where power is constant between the two
//    samples around it; otherwise its error is at most the change of power times that bracket
//    (about one sampling interval). The counter's own update rate bounds it too: amdgpu serves
//    a cached gpu_metrics table for up to 5 ms (SMU_GPU_METRICS_CACHE_INTERVAL,
//    drivers/gpu/drm/amd/pm/swsmu/smu_cmn.c) and the SMU refreshes its accumulator every
//    ~1 ms on recent parts, more slowly on older ones; RAPL updates every ~1 ms; NVML's total
//    energy counter at the driver's rate. Iterations much shorter than that get per-iteration
//    energy that is only right on average (their sums stay exact).
//  - A failed read (device gone, counter reset) breaks the ring: no interpolation spans it, so
//    an iteration across it has no energy (counted, never guessed). So does a pause: sampling
//    runs only while training processes are watched (an idle node costs no wake-ups).
//  - Bounded: a fixed ring (kRingSamples); an iteration older than the ring (one longer than
//    ring span minus the poll delay) has no energy.
//
// Threads: io_context thread only. The clock is injectable for tests.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectors/collector_config.h"
#include "collectors/energy/energy_collector.h"
#include "collectors/energy/energy_source.h"
#include "common/status.h"

namespace seqpoint::daemon {

using MonotonicClock = std::function<uint64_t()>;
uint64_t MonotonicNowNs();  // CLOCK_MONOTONIC, the probes' clock

struct EnergySamplerStats {
  uint64_t reads = 0;
  uint64_t failures = 0;
  uint64_t slow_reads = 0;      // took longer than kMaxReadNs: value kept out (see Sample)
  double read_cost_us = 0;      // summed wall time of the reads
  uint64_t interpolations = 0;  // iterations given an energy
  // Summed width of the sample brackets interpolated in (two per iteration): their mean is the
  // time resolution actually achieved.
  double bracket_ns_sum = 0;
  std::string last_error;
};

class EnergySampler {
 public:
  static constexpr size_t kRingSamples = 8192;  // 6.8 min at 50 ms; 128 KiB
  // A read is timestamped at the middle of [before, after]; one that took longer than this
  // (the daemon was preempted inside it) has no timestamp worth interpolating at, so it is
  // left out: the bracket around it just widens, which is exact under constant power.
  static constexpr uint64_t kMaxReadNs = 1'000'000;

  // Opens the first source of config.energy.sources that is present; NotFound naming why each
  // was skipped when none is.
  static Result<std::unique_ptr<EnergySampler>> Open(
      const collectors::CollectorConfig& config,
      const std::vector<collectors::EnergySourceInfo>& registry,
      MonotonicClock clock = MonotonicNowNs);
  // A sampler over a given source (tests).
  static Result<std::unique_ptr<EnergySampler>> OpenSource(
      std::unique_ptr<collectors::EnergySource> source, MonotonicClock clock = MonotonicNowNs);

  // Reads the counter now and appends the sample (a failed read appends a break, a slow one
  // nothing), then calls the on_sample callback.
  void Sample();
  // Called after every Sample(): the run manager settles the iterations that waited for it.
  void set_on_sample(std::function<void()> fn) { on_sample_ = std::move(fn); }
  // Whether a sample at or after t_ns is in the ring: an iteration that ended at t_ns can be
  // given its energy now, without reading the counter.
  bool Covers(uint64_t t_ns) const { return size_ > 0 && At(size_ - 1).t_ns >= t_ns; }
  // Sampling stops for a while (nothing to watch): the next Sample starts after a break, so no
  // interpolation spans the unsampled gap.
  void Pause() { paused_ = true; }
  // Energy in uJ over [begin_ns, end_ns]; samples now first when the last sample is older than
  // end_ns (seqpointd never lets it: it waits for the next periodic sample, Covers()).
  // nullopt: not covered (too old, a break in between, or no read succeeded).
  // `counted`: false for the further pieces of one iteration's window (energy_attribution.h),
  // so the stats count iterations, not pieces.
  std::optional<double> EnergyBetween(uint64_t begin_ns, uint64_t end_ns, bool counted = true);
  // The time of the latest sample (0: none yet), on the sampler's clock.
  uint64_t last_sample_ns() const { return size_ > 0 ? At(size_ - 1).t_ns : 0; }

  std::string Describe() const { return source_->Describe(); }
  std::string_view source_name() const { return source_->name(); }
  const EnergySamplerStats& stats() const { return stats_; }

 private:
  struct Point {
    uint64_t t_ns = 0;
    double uj = 0;
    bool valid = false;  // false: a failed read, nothing interpolates across it
  };
  EnergySampler(std::unique_ptr<collectors::EnergySource> source, MonotonicClock clock)
      : source_(std::move(source)), clock_(std::move(clock)) {}
  const Point& At(size_t i) const { return ring_[(head_ + i) % ring_.size()]; }
  void Read();  // Sample() without the callback
  void Push(const Point& p);
  // Index of the last point with t <= t_ns, or nullopt.
  std::optional<size_t> Floor(uint64_t t_ns) const;
  std::optional<double> Interpolate(uint64_t t_ns, size_t* bracket_start) const;

  std::unique_ptr<collectors::EnergySource> source_;
  MonotonicClock clock_;
  std::vector<Point> ring_;  // grows to kRingSamples, then wraps
  size_t head_ = 0;          // oldest point once full
  size_t size_ = 0;
  bool paused_ = false;
  EnergySamplerStats stats_;
  std::function<void()> on_sample_;
};

}  // namespace seqpoint::daemon
