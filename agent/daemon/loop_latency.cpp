#include "agent/daemon/loop_latency.h"

#include <time.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace seqpoint::daemon {

int LatencyHistogram::Bucket(int64_t ns) {
  if (ns >= (int64_t{1} << 58)) return kOpen;  // years: the open-ended bucket
  const uint64_t us_x16 = static_cast<uint64_t>(ns) * kPerOctave / 1000;  // 1/16 µs units
  if (us_x16 < kPerOctave) return 0;                                      // under 1 µs
  const int octave = std::bit_width(us_x16) - 1 - 4;  // us_x16 in [16 << octave, 32 << octave)
  if (octave >= kOctaves) return kOpen;
  const int sub = static_cast<int>((us_x16 >> octave) - kPerOctave);  // 0..15
  return 1 + octave * kPerOctave + sub;
}

int64_t LatencyHistogram::UpperEdge(int bucket) {
  if (bucket == 0) return 1000;
  if (bucket == kOpen) return INT64_MAX;
  const int octave = (bucket - 1) / kPerOctave;
  const int sub = (bucket - 1) % kPerOctave;
  // [ (16+sub) << octave, (17+sub) << octave ) in 1/16 µs
  return (static_cast<int64_t>(kPerOctave + sub + 1) << octave) * 1000 / kPerOctave;
}

void LatencyHistogram::Record(int64_t ns) {
  if (ns < 0) ns = 0;
  ++buckets_[Bucket(ns)];
  ++count_;
  if (ns > max_ns_) max_ns_ = ns;
}

int64_t LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * count_)));
  uint64_t seen = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    // The last bucket is open-ended; the largest bucket's edge never exceeds the max seen.
    if (seen >= rank) return std::min(UpperEdge(static_cast<int>(b)), max_ns_);
  }
  return max_ns_;
}

nlohmann::json LatencyHistogram::Json() const {
  auto us = [this](int64_t ns) -> nlohmann::json {
    if (count_ == 0) return nullptr;
    return std::round(ns / 100.0) / 10.0;  // 0.1 µs
  };
  return {{"count", count_},
          {"p50_us", us(Quantile(0.5))},
          {"p99_us", us(Quantile(0.99))},
          {"max_us", us(max_ns_)}};
}

namespace {
int64_t MonotonicNow() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

LoopLatencySink::LoopLatencySink(IterationSink* next, bool timestamps_are_ours,
                                 std::function<int64_t()> now)
    : next_(next),
      on_(timestamps_are_ours),
      now_(now ? std::move(now) : MonotonicNow),
      started_ns_(now_()) {}

void LoopLatencySink::Time(LatencyHistogram& h, uint64_t stamp_ns) {
  if (stamp_ns == 0) return;
  const auto stamp = static_cast<int64_t>(stamp_ns);
  if (stamp < started_ns_) {
    ++before_start_;
    return;
  }
  const int64_t now = now_();
  if (stamp > now) {
    ++clock_skew_;
    return;
  }
  h.Record(now - stamp);
}

void LoopLatencySink::OnIterationBegin(const IterationBegin& begin) {
  if (on_) Time(woken_, begin.begin_ns);  // begins are sent only when hooked, and wake at once
  next_->OnIterationBegin(begin);
}

void LoopLatencySink::OnIterationEnd(const IterationEnd& end) {
  if (on_) {
    if (end.begin_reported) {
      Time(woken_, end.end_ns);
    } else if (batched_seen_++ % kBatchedSample == 0) {
      Time(batched_, end.end_ns);
    }
  }
  next_->OnIterationEnd(end);
}

nlohmann::json LoopLatencySink::Json() const {
  if (!on_) {
    return {{"measured", false},
            {"why", "the source's timestamps are not this machine's clock (a replay)"}};
  }
  return {{"measured", true},
          {"how", "probe timestamp to the loop handling the record (CLOCK_MONOTONIC)"},
          {"woken_are",
           "loop latency: the records that wake the daemon at once (begins and ends of hooked "
           "iterations)"},
          {"woken", woken_.Json()},
          {"batched_are",
           "batch delay, not loop latency: end records of unhooked iterations, read at the next "
           "due wake-up or poll by design"},
          {"batched", batched_.Json()},
          {"batched_sampled_one_in", kBatchedSample},
          {"before_start", before_start_},
          {"clock_skew", clock_skew_}};
}

namespace {
void AddStats(MetricFamily& f, const LatencyHistogram& h) {
  const double none = std::nan("");  // a summary's quantiles with no observation
  const bool any = h.count() > 0;
  f.Add({{"stat", "p50"}}, any ? static_cast<double>(h.Quantile(0.5)) * 1e-9 : none);
  f.Add({{"stat", "p99"}}, any ? static_cast<double>(h.Quantile(0.99)) * 1e-9 : none);
  f.Add({{"stat", "max"}}, any ? static_cast<double>(h.max_ns()) * 1e-9 : none);
}
}  // namespace

std::vector<MetricFamily> LoopLatencySink::Families() const {
  std::vector<MetricFamily> out;
  MetricFamily loop = Gauge(
      "seqpoint_agent_loop_latency_seconds",
      "Since seqpointd started, how long the records that must wake it at once (begins and ends "
      "of hooked iterations) waited from their probe's timestamp to the daemon's loop handling "
      "them, by stat (p50, p99, max; percentiles are log-bucket upper edges, at most 6.25% high). "
      "NaN while none was timed (a replayed source is never timed).");
  AddStats(loop, woken_);
  out.push_back(std::move(loop));
  out.push_back(Counter("seqpoint_agent_loop_latency_events_total",
                        "Records timed in seqpoint_agent_loop_latency_seconds.")
                    .Add({}, static_cast<double>(woken_.count())));
  MetricFamily batch = Gauge(
      "seqpoint_agent_batch_delay_seconds",
      "Since seqpointd started, how long end records of unhooked iterations waited in the ring "
      "buffer before the daemon read them (batched on purpose: read at the next due wake-up or "
      "probes.poll_interval_ms; not loop latency), by stat (p50, p99, max), one record in 64 "
      "timed. NaN while none was timed.");
  AddStats(batch, batched_);
  out.push_back(std::move(batch));
  out.push_back(Counter("seqpoint_agent_batch_delay_events_total",
                        "Records timed in seqpoint_agent_batch_delay_seconds (one in 64).")
                    .Add({}, static_cast<double>(batched_.count())));
  return out;
}

}  // namespace seqpoint::daemon
