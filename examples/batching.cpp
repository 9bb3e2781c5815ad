// See batching.h.
#include "examples/batching.h"

#include <algorithm>

namespace seqpoint::examples {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void CutIntoBatches(const std::vector<uint32_t>& order, size_t batch_size,
                    std::vector<Batch>& out) {
  for (size_t i = 0; i < order.size(); i += batch_size) {
    size_t end = i + batch_size;
    if (end > order.size()) break;  // the remainder sits this epoch out (batching.h)
    out.emplace_back(order.begin() + static_cast<ptrdiff_t>(i),
                     order.begin() + static_cast<ptrdiff_t>(end));
  }
}

}  // namespace

Result<BatchingMode> ParseBatchingMode(const std::string& name) {
  if (name == "bucket") return BatchingMode::kBucket;
  if (name == "random") return BatchingMode::kRandom;
  return InvalidArgument("--batching '" + name + "' is not known; use bucket or random");
}

const char* BatchingModeName(BatchingMode mode) {
  return mode == BatchingMode::kBucket ? "bucket" : "random";
}

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = SplitMix64(seed);
}

uint64_t Rng::Next() {
  uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

uint64_t Rng::Below(uint64_t n) {
  // Rejection of the top partial range keeps every value equally likely.
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = Next();
  } while (x >= limit);
  return x % n;
}

std::vector<Batch> PlanEpoch(const std::vector<SentencePair>& pairs, const BatchingOptions& options,
                             uint64_t epoch) {
  uint64_t mix = options.seed;
  uint64_t epoch_seed = SplitMix64(mix) ^ (epoch * 0xd1b54a32d192ed03ULL);
  Rng rng(epoch_seed);
  size_t batch_size = std::max<size_t>(1, options.batch_size);
  std::vector<Batch> batches;
  if (options.mode == BatchingMode::kRandom) {
    std::vector<uint32_t> order(pairs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
    rng.Shuffle(order);
    CutIntoBatches(order, batch_size, batches);
    return batches;
  }
  size_t width = std::max<size_t>(1, options.bucket_width);
  std::vector<std::vector<uint32_t>> buckets;
  for (size_t i = 0; i < pairs.size(); ++i) {
    size_t b = (pairs[i].src.size() - 1) / width;  // src is never empty (corpus.cpp)
    if (b >= buckets.size()) buckets.resize(b + 1);
    buckets[b].push_back(static_cast<uint32_t>(i));
  }
  for (auto& bucket : buckets) {
    rng.Shuffle(bucket);
    CutIntoBatches(bucket, batch_size, batches);
  }
  rng.Shuffle(batches);
  return batches;
}

PaddedBatch MakePaddedBatch(const std::vector<SentencePair>& pairs, const Batch& batch) {
  PaddedBatch p;
  p.batch = static_cast<uint32_t>(batch.size());
  for (uint32_t i : batch) {
    p.src_len = std::max(p.src_len, static_cast<uint32_t>(pairs[i].src.size()));
    p.tgt_len = std::max(p.tgt_len, static_cast<uint32_t>(pairs[i].tgt.size() + 1));
    p.tokens += pairs[i].src.size() + pairs[i].tgt.size();
  }
  const size_t b = batch.size();
  p.src.assign(size_t{p.src_len} * b, kPadId);
  p.tgt_in.assign(size_t{p.tgt_len} * b, kPadId);
  p.tgt_out.assign(size_t{p.tgt_len} * b, kPadId);
  for (size_t j = 0; j < b; ++j) {
    const SentencePair& pair = pairs[batch[j]];
    for (size_t t = 0; t < pair.src.size(); ++t) p.src[t * b + j] = pair.src[t];
    p.tgt_in[j] = kBosId;
    for (size_t t = 0; t < pair.tgt.size(); ++t) {
      p.tgt_in[(t + 1) * b + j] = pair.tgt[t];
      p.tgt_out[t * b + j] = pair.tgt[t];
    }
    p.tgt_out[pair.tgt.size() * b + j] = kEosId;
  }
  return p;
}

}  // namespace seqpoint::examples
