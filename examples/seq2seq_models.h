// The two sequence-to-sequence models of `seqpoint-train` (libtorch modules).
//
// Both take time-major id matrices, src [S, B] and tgt_in [T, B] (0 = padding), and return
// logits [T, B, target vocabulary] for teacher-forced training. Padding never leaks into
// real positions: attention masks padded source positions, and the GRU decoder starts from a
// masked mean of the encoder outputs rather than from the encoder's last (maybe padded) step.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "examples/seq2seq_trainer.h"

namespace seqpoint::examples {

class Seq2SeqModel : public torch::nn::Module {
 public:
  virtual torch::Tensor Forward(const torch::Tensor& src, const torch::Tensor& tgt_in) = 0;
};

// GRU encoder-decoder with Luong "general" attention (Luong et al. 2015) computed after the
// decoder GRU over all target steps at once: scores = dec W_a enc^T, h~ = tanh(W_c[ctx; dec]).
std::shared_ptr<Seq2SeqModel> MakeGruAttentionModel(const ModelConfig& config);

// torch::nn::Transformer encoder-decoder with sinusoidal positions and a causal target mask.
std::shared_ptr<Seq2SeqModel> MakeTransformerModel(const ModelConfig& config);

}  // namespace seqpoint::examples
