// Batch plans on the real catalogs corpus, and padded batches on hand-made pairs.
#include "examples/batching.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

using namespace seqpoint::examples;

namespace {

const Corpus& Catalogs() {
  static const Corpus corpus = [] {
    auto c = LoadCorpus(SEQPOINT_EXAMPLES_DATA_DIR "/ende_debian_catalogs.tsv.xz", {});
    REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    return std::move(*c);
  }();
  return corpus;
}

std::vector<uint32_t> SeqLens(const std::vector<SentencePair>& pairs,
                              const std::vector<Batch>& plan) {
  std::vector<uint32_t> out;
  for (const Batch& b : plan) out.push_back(MakePaddedBatch(pairs, b).src_len);
  return out;
}

// Full batches, no pair twice; returns how many pairs sit the epoch out.
size_t CheckFullBatchesNoRepeat(const std::vector<Batch>& plan, size_t n, size_t batch_size) {
  std::vector<int> seen(n, 0);
  for (const Batch& b : plan) {
    CHECK(b.size() == batch_size);
    for (uint32_t i : b) ++seen[i];
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c <= 1; }));
  return static_cast<size_t>(std::count(seen.begin(), seen.end(), 0));
}

}  // namespace

TEST_CASE("examples batching: bucket batches are full and hold similar source lengths") {
  const Corpus& c = Catalogs();
  BatchingOptions opt;
  opt.batch_size = 64;
  opt.bucket_width = 5;
  auto plan = PlanEpoch(c.pairs, opt, 0);
  size_t left_out = CheckFullBatchesNoRepeat(plan, c.pairs.size(), opt.batch_size);
  size_t buckets = 0;
  for (const SentencePair& p : c.pairs) buckets = std::max(buckets, (p.src.size() - 1) / 5 + 1);
  CHECK(left_out < buckets * opt.batch_size);  // only each bucket's remainder
  for (const Batch& b : plan) {
    size_t lo = SIZE_MAX, hi = 0;
    for (uint32_t i : b) {
      lo = std::min(lo, c.pairs[i].src.size());
      hi = std::max(hi, c.pairs[i].src.size());
    }
    CHECK((lo - 1) / opt.bucket_width == (hi - 1) / opt.bucket_width);
  }
  // Batch order is shuffled: not sorted by length.
  auto lens = SeqLens(c.pairs, plan);
  CHECK_FALSE(std::is_sorted(lens.begin(), lens.end()));
}

TEST_CASE("examples batching: random batches are full, the remainder sits the epoch out") {
  const Corpus& c = Catalogs();
  BatchingOptions opt;
  opt.mode = BatchingMode::kRandom;
  opt.batch_size = 50;
  auto plan = PlanEpoch(c.pairs, opt, 0);
  CHECK(CheckFullBatchesNoRepeat(plan, c.pairs.size(), 50) == c.pairs.size() % 50);
  // Too few pairs for one batch: an empty plan, which seqpoint-train reports.
  std::vector<SentencePair> few(3, SentencePair{{4}, {4}});
  CHECK(PlanEpoch(few, opt, 0).empty());
}

TEST_CASE("examples batching: the same seed gives the same seq_len sequence") {
  const Corpus& c = Catalogs();
  for (BatchingMode mode : {BatchingMode::kBucket, BatchingMode::kRandom}) {
    BatchingOptions opt;
    opt.mode = mode;
    opt.seed = 7;
    auto a = SeqLens(c.pairs, PlanEpoch(c.pairs, opt, 3));
    auto b = SeqLens(c.pairs, PlanEpoch(c.pairs, opt, 3));
    CHECK(a == b);
    CHECK(a != SeqLens(c.pairs, PlanEpoch(c.pairs, opt, 4)));  // epochs differ
    opt.seed = 8;
    CHECK(a != SeqLens(c.pairs, PlanEpoch(c.pairs, opt, 3)));  // seeds differ
  }
  // A fixed point of the generator, so that a change of algorithm is noticed.
  Rng rng(1);
  std::vector<uint64_t> draws;
  for (int i = 0; i < 4; ++i) draws.push_back(rng.Below(1000));
  Rng again(1);
  for (int i = 0; i < 4; ++i) CHECK(draws[static_cast<size_t>(i)] == again.Below(1000));
}

TEST_CASE("examples batching: padded batch layout and token counts") {
  std::vector<SentencePair> pairs = {{{10, 11, 12}, {20}}, {{13}, {21, 22, 23, 24}}};
  PaddedBatch p = MakePaddedBatch(pairs, {0, 1});
  CHECK(p.src_len == 3);
  CHECK(p.tgt_len == 5);  // 4 words + the marker
  CHECK(p.batch == 2);
  CHECK(p.tokens == 3 + 1 + 1 + 4);
  // time-major [len][batch]
  CHECK(p.src == std::vector<int64_t>{10, 13, 11, kPadId, 12, kPadId});
  CHECK(p.tgt_in ==
        std::vector<int64_t>{kBosId, kBosId, 20, 21, kPadId, 22, kPadId, 23, kPadId, 24});
  CHECK(p.tgt_out ==
        std::vector<int64_t>{20, 21, kEosId, 22, kPadId, 23, kPadId, 24, kPadId, kEosId});
}
