// Energy on every iteration: a node-level cumulative energy counter (collectors/energy: the
// gpu_metrics accumulator, ROCm SMI, NVML or RAPL, in the order of collectors.energy.sources)
// sampled every runs.energy_sample_interval_ms into a ring of samples. An iteration's energy is
// the counter interpolated linearly at its end timestamp minus the same at its begin
// timestamp, both probe timestamps (bpf_ktime_get_ns is CLOCK_MONOTONIC). Reading the counter
// when the daemon sees the end record would be wrong: end records arrive batched, up to
// probes.poll_interval_ms late; and it would put a vendor call on the iteration path.
//
// Off the loop: in seqpointd the counter is read on the reader's own thread (energy_reader.h);
// each Sample() on the event loop asks for the next read and files the reads finished since
// the last one, so the loop never waits for a read (an NVML read on an H100 took 4 ms). Tests
// read on the caller's thread, in lockstep with their clock.
//
// Uncertainty, kept and said: a read's value stands for an instant in [t0 - U, t1] (the clock
// around the read, and U the counter's own update period measured at open). A sample is kept
// at the middle of that bracket with its half-width, however slow the read (NVML on an H100:
// 4 ms reads of a counter updated every 100 ms); only a read longer than both kMaxReadNs and U
// is left out (it may hold either of two updates). An iteration's energy is a linear combination of
// its samples' values, so under constant power its error is at most the power times
// sum(|coefficient| x half-width): that time, over the iteration's duration, is its relative
// uncertainty. The value is kept whatever it is, because the energies of consecutive
// iterations telescope: their sums (a run's actual, a bin's total, a projection over many
// iterations) are exact but for the run's two edges. An iteration whose relative uncertainty
// is over kMaxRelativeUncertainty is counted as smeared (its value is spread over about one
// counter update of its neighbours), and the mean uncertainty is on /metrics and in status.
//
// Properties:
//  - Exact sums: interpolation is a function of time, so the energies of contiguous iterations
//    telescope to counter(last end) - counter(first begin).
//  - Resolution: where power changes between two samples, an interpolated value is off by at
//    most the change of power times that bracket (about one sampling interval). Iterations much
//    shorter than the interval get per-iteration energy that is only right on average.
//  - A failed read (device gone, counter reset) breaks the ring: no interpolation spans it, so
//    an iteration across it has no energy (counted, never guessed). So does a pause: sampling
//    runs only while training processes are watched (an idle node costs no wake-ups).
//  - Bounded: a fixed ring (kRingSamples); an iteration older than the ring has no energy.
//
// Threads: the event loop only (the reader's thread is energy_reader.h's). The clock is
// injectable for tests.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/energy/energy_attribution.h"
#include "agent/energy/energy_reader.h"
#include "collectors/collector_config.h"
#include "collectors/energy/energy_collector.h"
#include "collectors/energy/energy_source.h"
#include "common/status.h"

namespace seqpoint::daemon {

struct EnergySamplerStats {
  uint64_t reads = 0;
  uint64_t failures = 0;
  uint64_t slow_reads = 0;      // took longer than kMaxReadNs: kept, with their wider bracket
  uint64_t unplaced = 0;        // took longer than the counter's update period: left out
  uint64_t max_read_ns = 0;     // the slowest read
  uint64_t skipped = 0;         // ticks that found the previous read still in flight
  double read_cost_us = 0;      // summed wall time of the reads (on the reader's thread)
  double loop_ns = 0;           // summed time the caller (the event loop) spent in Sample()
  uint64_t interpolations = 0;  // iterations given an energy
  uint64_t uncovered = 0;       // iterations without: a break, too old, or not sampled yet
  uint64_t smeared = 0;         // iterations given one over kMaxRelativeUncertainty
  // Summed width of the sample brackets interpolated in (two per iteration): their mean is the
  // time resolution actually achieved.
  double bracket_ns_sum = 0;
  double uncertainty_sum = 0;  // summed relative uncertainty of the iterations given energy
  double duration_ns_sum = 0;  // summed (weighted) duration of the iterations given energy
  EnergyCalibration calibration;
  std::string last_error;
};

class EnergySampler {
 public:
  static constexpr size_t kRingSamples = 8192;  // 6.8 min at 50 ms; 256 KiB
  // A read longer than this is counted as slow (the source is slow, or the reader was
  // preempted inside it); it is kept, its bracket as wide as it took, unless it is longer than
  // the counter's update period too.
  static constexpr uint64_t kMaxReadNs = 1'000'000;
  // An iteration whose worst-case error under constant power is over this share of its energy
  // is counted as smeared: one part in ten, the precision a per-iteration figure is read at.
  static constexpr double kMaxRelativeUncertainty = 0.1;

  // Opens the first source of config.energy.sources that is present; NotFound naming why each
  // was skipped when none is. own_thread: read on the reader's thread (seqpointd).
  static Result<std::unique_ptr<EnergySampler>> Open(
      const collectors::CollectorConfig& config,
      const std::vector<collectors::EnergySourceInfo>& registry,
      MonotonicClock clock = MonotonicNowNs, bool own_thread = true);
  // A sampler over a given source; by default reading on the caller's thread (tests).
  static Result<std::unique_ptr<EnergySampler>> OpenSource(
      std::unique_ptr<collectors::EnergySource> source, MonotonicClock clock = MonotonicNowNs,
      bool own_thread = false);

  // Asks for the next read and files those finished (on the caller's thread: this one),
  // appending their samples (a failed read appends a break), then calls on_sample when any
  // was filed. Never waits for a read on its own thread.
  void Sample();
  // Samples until one at or after t_ns is filed or max_wait_ns of real time has passed, and
  // returns whether one was. Blocks: for a run's close only, whose last iterations would
  // otherwise go without energy when the reader's thread lags (CPU contention delays its reads
  // by hundreds of ms; a sample stands for up to one update period before its read). On the
  // caller's thread (tests) it samples once.
  bool SampleUntil(uint64_t t_ns, uint64_t max_wait_ns);
  static constexpr uint64_t kCloseWaitNs = 1'000'000'000;
  // Called after every Sample() that filed a sample: the run manager settles the iterations
  // that waited for it.
  void set_on_sample(std::function<void()> fn) { on_sample_ = std::move(fn); }
  // Whether a sample at or after t_ns is in the ring: an iteration that ended at t_ns can be
  // given its energy now.
  bool Covers(uint64_t t_ns) const { return size_ > 0 && At(size_ - 1).t_ns >= t_ns; }
  // Sampling stops for a while (nothing to watch): the next sample starts after a break, so no
  // interpolation spans the unsampled gap.
  void Pause() { paused_ = true; }
  // An iteration's energy in uJ: the weighted sum of the node's energy over its pieces
  // (energy_attribution.h), from the ring only (never a read). nullopt: not covered (too old,
  // a break in between, no sample past its end yet). `relative`: its relative uncertainty.
  std::optional<double> EnergyOver(const std::vector<EnergyPiece>& pieces,
                                   double* relative = nullptr);
  // The same over one window, the whole of it the iteration's. `counted`: false leaves the
  // stats alone.
  std::optional<double> EnergyBetween(uint64_t begin_ns, uint64_t end_ns, bool counted = true,
                                      double* relative = nullptr);
  // The time of the latest sample (0: none yet), on the sampler's clock.
  uint64_t last_sample_ns() const { return size_ > 0 ? At(size_ - 1).t_ns : 0; }

  std::string Describe() const { return reader_->description(); }
  std::string_view source_name() const { return reader_->name(); }
  const EnergySamplerStats& stats() const { return stats_; }

 private:
  struct Point {
    uint64_t t_ns = 0;  // the middle of the instant's bracket [t0 - U, t1]
    uint64_t h_ns = 0;  // its half-width
    double uj = 0;
    bool valid = false;  // false: a failed read, nothing interpolates across it
  };
  // A point's value at t as a combination of samples: value = (1 - f) At(i) + f At(i + 1).
  struct Interp {
    size_t i = 0;
    double f = 0;
    double uj = 0;
  };
  explicit EnergySampler(std::unique_ptr<EnergyReader> reader) : reader_(std::move(reader)) {}
  const Point& At(size_t i) const { return ring_[(head_ + i) % ring_.size()]; }
  bool Drain();                    // files the finished reads; whether there were any
  void File(const EnergyRead& r);  // one finished read into the ring
  void Push(const Point& p);
  // Index of the last point with t <= t_ns, or nullopt.
  std::optional<size_t> Floor(uint64_t t_ns) const;
  std::optional<Interp> Interpolate(uint64_t t_ns) const;
  std::optional<double> Estimate(const std::vector<EnergyPiece>& pieces, double* relative,
                                 double* duration_ns, double* bracket_ns) const;

  std::unique_ptr<EnergyReader> reader_;
  std::vector<Point> ring_;  // grows to kRingSamples, then wraps
  size_t head_ = 0;          // oldest point once full
  size_t size_ = 0;
  bool paused_ = false;
  EnergySamplerStats stats_;
  std::function<void()> on_sample_;
};

}  // namespace seqpoint::daemon
