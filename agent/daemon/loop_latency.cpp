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
  if (us_x16 < kPerOctave) return 0;                                     // under 1 µs
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
    : next_(next), on_(timestamps_are_ours), now_(now ? std::move(now) : MonotonicNow) {}

void LoopLatencySink::Time(LatencyHistogram& h, uint64_t stamp_ns) {
  const int64_t now = now_();
  if (stamp_ns == 0) return;
  if (static_cast<int64_t>(stamp_ns) > now) {
    ++clock_skew_;
    return;
  }
  h.Record(now - static_cast<int64_t>(stamp_ns));
}

void LoopLatencySink::OnIterationBegin(const IterationBegin& begin) {
  if (on_) Time(woken_, begin.begin_ns);  // begins are sent only when wanted, and wake at once
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
          {"how", "probe timestamp to the loop handling the event (CLOCK_MONOTONIC)"},
          {"woken", woken_.Json()},
          {"batched", batched_.Json()},
          {"batched_sampled_one_in", kBatchedSample},
          {"clock_skew", clock_skew_}};
}

}  // namespace seqpoint::daemon
