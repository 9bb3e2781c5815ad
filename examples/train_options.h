// Command line of `seqpoint-train`. Parsing is strict: an unknown option, a missing value or a
// value out of range is an error naming the option and what it accepts.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "examples/batching.h"
#include "examples/corpus.h"

namespace seqpoint::examples {

struct TrainOptions {
  std::string model = "gru";     // gru | transformer
  std::string corpus;            // required
  std::string trace;             // empty: no trace file
  BatchingOptions batching;      // --batching, --batch-size, --bucket-width, --seed
  CorpusOptions corpus_options;  // --vocab, --max-len
  int64_t hidden = 128;
  int64_t layers = 1;
  int64_t heads = 4;  // transformer only
  double dropout = 0.1;
  double learning_rate = 1e-3;
  uint64_t iterations = 0;  // 0: no iteration limit
  uint64_t epochs = 0;      // 0: no epoch limit; with neither limit one epoch is run
  uint64_t seed = 1;
  int threads = 0;  // 0: one per CPU
  uint64_t log_every = 50;
  bool help = false;
};

Result<TrainOptions> ParseTrainOptions(int argc, const char* const* argv);
const char* TrainUsage();

}  // namespace seqpoint::examples
