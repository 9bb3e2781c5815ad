#include "selector/sl_histogram.h"

#include <bit>

namespace seqpoint::selector {

uint32_t SlHistogram::BucketIndex(uint32_t seq_len) {
  if (seq_len < kExactLimit) return seq_len;
  uint32_t octave = 31 - static_cast<uint32_t>(std::countl_zero(seq_len));  // 16..31
  uint32_t sub = (seq_len >> (octave - 8)) & (kSubBuckets - 1);
  return kExactLimit + (octave - 16) * kSubBuckets + sub;
}

SlBucket SlHistogram::BucketBounds(uint32_t index) {
  SlBucket b;
  b.index = index;
  if (index < kExactLimit) {
    b.lo = b.hi = index;
    return b;
  }
  uint32_t octave = 16 + (index - kExactLimit) / kSubBuckets;
  uint32_t sub = (index - kExactLimit) % kSubBuckets;
  uint64_t width = 1ull << (octave - 8);
  uint64_t lo = (1ull << octave) + sub * width;
  b.lo = static_cast<uint32_t>(lo);
  b.hi = static_cast<uint32_t>(lo + width - 1);
  return b;
}

std::vector<SlBucket> SlHistogram::Buckets() const {
  std::vector<SlBucket> out;
  out.reserve(distinct_);
  for (uint32_t i = 0; i < buckets_.size(); ++i) {
    if (buckets_[i].count == 0) continue;
    SlBucket b = BucketBounds(i);
    b.stats = buckets_[i];
    out.push_back(b);
  }
  return out;
}

const SlStats* SlHistogram::Find(uint32_t seq_len) const {
  uint32_t i = BucketIndex(seq_len);
  if (i >= buckets_.size() || buckets_[i].count == 0) return nullptr;
  return &buckets_[i];
}

}  // namespace seqpoint::selector
