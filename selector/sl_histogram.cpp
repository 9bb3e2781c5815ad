#include "selector/sl_histogram.h"

namespace seqpoint::selector {

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
