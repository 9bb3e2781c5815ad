// Batches of sentence pairs for one epoch, and their padded, time-major id matrices.
//
// kBucket is GNMT-style bucketing: pairs go into buckets by source length (width
// `bucket_width` tokens), each bucket is shuffled and cut into batches of `batch_size`, and the
// batches of all buckets are shuffled together. kRandom shuffles all pairs and cuts them into
// batches, each padded to its longest sentence.
//
// Every batch is full: a bucket's (or, for kRandom, the epoch's) last < batch_size pairs sit out
// the epoch, and the shuffle picks other ones next epoch. Why: with short remainder batches the
// iteration time stops following seq_len (on the fillets corpus, 16% of bucket batches were
// short, mostly the long-sentence buckets, and the R^2 of time on seq_len fell from 0.62 to
// 0.07), and real trainers drop them too (drop_last). A bucket smaller than one batch is never
// used; an epoch with no batch at all is the caller's error to report.
//
// Determinism: the plan of epoch e depends only on (seed, e, the pair lengths), through our own
// SplitMix64/xoshiro generator and Fisher-Yates shuffle (std::shuffle and the std
// distributions are implementation-defined), so the same seed gives the same seq_len sequence
// on every machine and thread count. Nothing here uses libtorch or threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "examples/corpus.h"

namespace seqpoint::examples {

enum class BatchingMode { kBucket, kRandom };
Result<BatchingMode> ParseBatchingMode(const std::string& name);  // "bucket" | "random"
const char* BatchingModeName(BatchingMode mode);

struct BatchingOptions {
  BatchingMode mode = BatchingMode::kBucket;
  size_t batch_size = 32;
  size_t bucket_width = 5;  // source tokens per bucket (kBucket only)
  uint64_t seed = 1;
};

// Deterministic pseudo-random numbers (xoshiro256**, seeded through SplitMix64).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  uint64_t Below(uint64_t n);  // uniform in [0, n), n > 0, unbiased
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Below(i)]);
  }

 private:
  uint64_t s_[4];
};

using Batch = std::vector<uint32_t>;  // indices into the corpus pairs

// The batches of epoch `epoch`, in training order: each of batch_size pairs, no pair twice.
std::vector<Batch> PlanEpoch(const std::vector<SentencePair>& pairs, const BatchingOptions& options,
                             uint64_t epoch);

// A batch ready for the model. Matrices are time-major, [len][batch], padded with kPadId.
struct PaddedBatch {
  uint32_t src_len = 0;          // padded source length: the iteration's seq_len
  uint32_t tgt_len = 0;          // padded decoder length: longest target + 1 (the begin/end marker)
  uint32_t batch = 0;            // sentences
  uint64_t tokens = 0;           // real source + target words, no padding, no begin/end markers
  std::vector<int64_t> src;      // src_len x batch
  std::vector<int64_t> tgt_in;   // tgt_len x batch: <s> w1 .. wn
  std::vector<int64_t> tgt_out;  // tgt_len x batch: w1 .. wn </s>
};
PaddedBatch MakePaddedBatch(const std::vector<SentencePair>& pairs, const Batch& batch);

}  // namespace seqpoint::examples
