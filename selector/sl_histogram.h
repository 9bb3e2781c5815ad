// Streaming histogram of the iteration key: per sequence length (SL), how many iterations, how
// many are eligible for measurement (past warm-up), and the summed cost proxy and tokens.
//
// O(1) per event and bounded memory whatever the run length: SLs below kExactLimit get one
// exact bucket each (a dense array grown on demand); larger SLs share geometric buckets of
// 1/256 of an octave, so the array never exceeds kMaxBuckets entries (~2.2 MiB).
// Not thread-safe: one owner feeds it (the selector of one run).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "selector/state_codec.h"

namespace seqpoint::selector {

// The cost model of one iteration: cost = alpha * L*B + beta * L^2*B with alpha, beta >= 0 unknown,
// where L = seq_len and B = batch (1 when the trace has no batch column). The linear term is the
// per-token work of RNN cells and feed-forward layers (the paper's observation, and ours on
// libtorch: time close to linear in padded tokens); the quadratic term is attention. The
// selector bounds its representative error for both terms, hence for every alpha, beta >= 0.
inline double CostProxy(uint32_t seq_len, uint32_t batch) {
  return static_cast<double>(seq_len) * static_cast<double>(batch == 0 ? 1 : batch);
}

struct SlStats {
  uint64_t count = 0;     // iterations
  uint64_t eligible = 0;  // iterations that may be measured (not warm-up)
  double sum_cost = 0;    // summed CostProxy (L*B)
  double sum_cost2 = 0;   // summed quadratic term (L^2*B)
  double sum_tokens = 0;  // summed real tokens
};

struct SlBucket {
  uint32_t lo = 0;  // smallest SL the bucket holds
  uint32_t hi = 0;  // largest SL the bucket holds (== lo for exact buckets)
  uint32_t index = 0;
  SlStats stats;
  double mean_cost() const { return stats.count ? stats.sum_cost / stats.count : 0.0; }
  double mean_cost2() const { return stats.count ? stats.sum_cost2 / stats.count : 0.0; }
};

class SlHistogram {
 public:
  static constexpr uint32_t kExactLimit = 1u << 16;
  static constexpr uint32_t kSubBuckets = 256;  // per octave above kExactLimit
  static constexpr uint32_t kMaxBuckets = kExactLimit + 16 * kSubBuckets;

  // Inline: every iteration of a run goes through it, in Add and in the selector.
  static uint32_t BucketIndex(uint32_t seq_len) {
    if (seq_len < kExactLimit) return seq_len;
    const uint32_t octave = 31 - static_cast<uint32_t>(std::countl_zero(seq_len));  // 16..31
    const uint32_t sub = (seq_len >> (octave - 8)) & (kSubBuckets - 1);
    return kExactLimit + (octave - 16) * kSubBuckets + sub;
  }
  static SlBucket BucketBounds(uint32_t index);

  void Add(uint32_t seq_len, double cost, double tokens, bool eligible) {
    uint32_t i = BucketIndex(seq_len);
    if (i >= buckets_.size()) buckets_.resize(i + 1);
    SlStats& s = buckets_[i];
    s.count += 1;
    s.eligible += eligible ? 1 : 0;
    s.sum_cost += cost;
    s.sum_cost2 += cost * static_cast<double>(seq_len);
    s.sum_tokens += tokens;
    total_ += 1;
    total_cost_ += cost;
    if (s.count == 1) ++distinct_;
  }

  uint64_t total() const { return total_; }
  double total_cost() const { return total_cost_; }
  uint32_t distinct() const { return distinct_; }
  // The non-empty buckets in ascending SL order.
  std::vector<SlBucket> Buckets() const;
  const SlStats* Find(uint32_t seq_len) const;
  size_t MemoryBytes() const { return buckets_.capacity() * sizeof(SlStats); }
  // The state as bytes and back (selector_checkpoint.cpp); Load is false on a short image.
  void SaveState(StateWriter& w) const;
  bool LoadState(StateReader& r);

 private:
  std::vector<SlStats> buckets_;
  uint64_t total_ = 0;
  double total_cost_ = 0;
  uint32_t distinct_ = 0;
};

}  // namespace seqpoint::selector
