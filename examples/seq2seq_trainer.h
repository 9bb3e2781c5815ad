// The libtorch side of `seqpoint-train`, behind an interface that does not include libtorch,
// so that only seq2seq_trainer.cpp and seq2seq_models.cpp pay libtorch's compile time.
//
// Threads: a trainer is used from one thread. libtorch runs each step on its intra-op pool
// (set by ConfigureTorchThreads) and OpenBLAS's own workers; callers that count the process's
// CPU time must open their counters before the first Step (see perf_self_counters.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "examples/batching.h"

namespace seqpoint::examples {

struct ModelConfig {
  std::string model = "gru";  // gru | transformer
  int64_t src_vocab = 0;      // ids, including the special ones
  int64_t tgt_vocab = 0;
  int64_t hidden = 128;
  int64_t layers = 1;
  int64_t heads = 4;
  double dropout = 0.1;
  double learning_rate = 1e-3;
  uint64_t seed = 1;  // initialisation and dropout
};

class Seq2SeqTrainer {
 public:
  static Result<std::unique_ptr<Seq2SeqTrainer>> Create(const ModelConfig& config);
  virtual ~Seq2SeqTrainer() = default;
  // One training iteration with teacher forcing: forward, cross-entropy over the real target
  // tokens (padding ignored), backward, gradient-norm clipping at 5 (as GNMT), Adam step.
  // Returns the loss (mean per target token). A libtorch error becomes kInternal.
  virtual Result<double> Step(const PaddedBatch& batch) = 0;
  virtual int64_t parameter_count() const = 0;
};

// torch::set_num_threads(threads) and one inter-op thread. Call before any libtorch work.
Status ConfigureTorchThreads(int threads);
std::string TorchVersion();

}  // namespace seqpoint::examples
