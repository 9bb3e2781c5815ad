// See seq2seq_trainer.h. libtorch throws c10::Error; every throw is caught here and becomes a
// Status, so no exception leaves this file.
#include "examples/seq2seq_trainer.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "examples/corpus.h"
#include "examples/seq2seq_models.h"

namespace seqpoint::examples {
namespace {

constexpr double kMaxGradNorm = 5.0;

// A [len, batch] int64 tensor that owns a copy of `ids`.
torch::Tensor IdMatrix(const std::vector<int64_t>& ids, uint32_t len, uint32_t batch) {
  return torch::from_blob(const_cast<int64_t*>(ids.data()), {len, batch}, torch::kInt64).clone();
}

class TorchTrainer : public Seq2SeqTrainer {
 public:
  TorchTrainer(std::shared_ptr<Seq2SeqModel> model, const ModelConfig& config)
      : model_(std::move(model)),
        tgt_vocab_(config.tgt_vocab),
        optimizer_(model_->parameters(), torch::optim::AdamOptions(config.learning_rate)) {
    model_->train();
  }

  Result<double> Step(const PaddedBatch& b) override {
    if (b.batch == 0 || b.src_len == 0 || b.tgt_len == 0) {
      return InvalidArgument("empty batch passed to the trainer");
    }
    try {
      torch::Tensor src = IdMatrix(b.src, b.src_len, b.batch);
      torch::Tensor tgt_in = IdMatrix(b.tgt_in, b.tgt_len, b.batch);
      torch::Tensor tgt_out = IdMatrix(b.tgt_out, b.tgt_len, b.batch);
      optimizer_.zero_grad();
      torch::Tensor logits = model_->Forward(src, tgt_in);
      torch::Tensor loss = torch::nn::functional::cross_entropy(
          logits.reshape({-1, tgt_vocab_}), tgt_out.reshape({-1}),
          torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kPadId));
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model_->parameters(), kMaxGradNorm);
      optimizer_.step();
      return loss.item<double>();
    } catch (const std::exception& e) {
      return Internal(std::string("libtorch training step failed: ") + e.what());
    }
  }

  int64_t parameter_count() const override {
    int64_t n = 0;
    for (const auto& p : model_->parameters()) n += p.numel();
    return n;
  }

 private:
  std::shared_ptr<Seq2SeqModel> model_;
  int64_t tgt_vocab_;
  torch::optim::Adam optimizer_;
};

}  // namespace

Result<std::unique_ptr<Seq2SeqTrainer>> Seq2SeqTrainer::Create(const ModelConfig& config) {
  if (config.src_vocab <= kFirstWordId || config.tgt_vocab <= kFirstWordId) {
    return InvalidArgument("the vocabularies hold no word; check the corpus");
  }
  try {
    torch::manual_seed(config.seed);
    std::shared_ptr<Seq2SeqModel> model;
    if (config.model == "gru") {
      model = MakeGruAttentionModel(config);
    } else if (config.model == "transformer") {
      model = MakeTransformerModel(config);
    } else {
      return InvalidArgument("model '" + config.model + "' is not known; use gru or transformer");
    }
    return std::unique_ptr<Seq2SeqTrainer>(new TorchTrainer(std::move(model), config));
  } catch (const std::exception& e) {
    return Internal(std::string("building the libtorch model failed: ") + e.what());
  }
}

Status ConfigureTorchThreads(int threads) {
  try {
    at::set_num_interop_threads(1);
    torch::set_num_threads(threads);
  } catch (const std::exception& e) {
    return Internal(std::string("setting libtorch threads failed: ") + e.what());
  }
  return Status::Ok();
}

std::string TorchVersion() { return TORCH_VERSION; }

}  // namespace seqpoint::examples
