// See seq2seq_models.h.
#include "examples/seq2seq_models.h"

#include <cmath>
#include <limits>

#include "examples/corpus.h"

namespace seqpoint::examples {
namespace {

namespace nn = torch::nn;

nn::Embedding MakeEmbedding(int64_t vocab, int64_t dim) {
  return nn::Embedding(nn::EmbeddingOptions(vocab, dim).padding_idx(kPadId));
}

class GruAttentionModel : public Seq2SeqModel {
 public:
  explicit GruAttentionModel(const ModelConfig& c)
      : layers_(c.layers),
        src_embed_(register_module("src_embed", MakeEmbedding(c.src_vocab, c.hidden))),
        tgt_embed_(register_module("tgt_embed", MakeEmbedding(c.tgt_vocab, c.hidden))),
        encoder_(register_module("encoder", nn::GRU(nn::GRUOptions(c.hidden, c.hidden)
                                                        .num_layers(c.layers)
                                                        .dropout(c.layers > 1 ? c.dropout : 0.0)))),
        decoder_(register_module("decoder", nn::GRU(nn::GRUOptions(c.hidden, c.hidden)
                                                        .num_layers(c.layers)
                                                        .dropout(c.layers > 1 ? c.dropout : 0.0)))),
        bridge_(register_module("bridge", nn::Linear(c.hidden, c.hidden))),
        attn_score_(register_module("attn_score",
                                    nn::Linear(nn::LinearOptions(c.hidden, c.hidden).bias(false)))),
        attn_combine_(register_module(
            "attn_combine", nn::Linear(nn::LinearOptions(2 * c.hidden, c.hidden).bias(false)))),
        project_(register_module("project", nn::Linear(c.hidden, c.tgt_vocab))),
        dropout_(register_module("dropout", nn::Dropout(c.dropout))) {}

  torch::Tensor Forward(const torch::Tensor& src, const torch::Tensor& tgt_in) override {
    torch::Tensor real = src.ne(kPadId);                                            // [S, B]
    torch::Tensor enc = std::get<0>(encoder_->forward(dropout_(src_embed_(src))));  // [S,B,H]
    torch::Tensor weight = real.unsqueeze(2).to(enc.scalar_type());
    torch::Tensor mean = (enc * weight).sum(0) / weight.sum(0);  // [B, H]
    torch::Tensor h0 = torch::tanh(bridge_(mean)).unsqueeze(0).repeat({layers_, 1, 1});
    torch::Tensor dec = std::get<0>(decoder_->forward(dropout_(tgt_embed_(tgt_in)), h0));
    torch::Tensor keys = enc.transpose(0, 1);  // [B, S, H]
    torch::Tensor scores = torch::bmm(attn_score_(dec).transpose(0, 1), keys.transpose(1, 2));
    scores = scores.masked_fill(real.logical_not().transpose(0, 1).unsqueeze(1),
                                -std::numeric_limits<float>::infinity());  // [B, T, S]
    torch::Tensor context = torch::bmm(torch::softmax(scores, -1), keys).transpose(0, 1);
    torch::Tensor attentional = torch::tanh(attn_combine_(torch::cat({context, dec}, 2)));
    return project_(dropout_(attentional));  // [T, B, V]
  }

 private:
  int64_t layers_;
  nn::Embedding src_embed_, tgt_embed_;
  nn::GRU encoder_, decoder_;
  nn::Linear bridge_, attn_score_, attn_combine_, project_;
  nn::Dropout dropout_;
};

class TransformerModel : public Seq2SeqModel {
 public:
  explicit TransformerModel(const ModelConfig& c)
      : hidden_(c.hidden),
        src_embed_(register_module("src_embed", MakeEmbedding(c.src_vocab, c.hidden))),
        tgt_embed_(register_module("tgt_embed", MakeEmbedding(c.tgt_vocab, c.hidden))),
        transformer_(register_module(
            "transformer",
            nn::Transformer(nn::TransformerOptions(c.hidden, c.heads, c.layers, c.layers)
                                .dim_feedforward(4 * c.hidden)
                                .dropout(c.dropout)))),
        project_(register_module("project", nn::Linear(c.hidden, c.tgt_vocab))) {}

  torch::Tensor Forward(const torch::Tensor& src, const torch::Tensor& tgt_in) override {
    const int64_t s = src.size(0), t = tgt_in.size(0);
    EnsurePositions(std::max(s, t));
    const double scale = std::sqrt(static_cast<double>(hidden_));
    torch::Tensor x = src_embed_(src) * scale + positions_.slice(0, 0, s);
    torch::Tensor y = tgt_embed_(tgt_in) * scale + positions_.slice(0, 0, t);
    torch::Tensor src_pad = src.eq(kPadId).transpose(0, 1);  // [B, S], true = ignore
    torch::Tensor tgt_pad = tgt_in.eq(kPadId).transpose(0, 1);
    torch::Tensor causal = nn::TransformerImpl::generate_square_subsequent_mask(t);
    torch::Tensor out =
        transformer_->forward(x, y, /*src_mask=*/{}, causal, /*memory_mask=*/{}, src_pad, tgt_pad,
                              /*memory_key_padding_mask=*/src_pad);
    return project_(out);
  }

 private:
  // Sinusoidal position encodings (Vaswani et al. 2017), [len, 1, H], grown on demand.
  void EnsurePositions(int64_t len) {
    if (positions_.defined() && positions_.size(0) >= len) return;
    torch::Tensor pos = torch::arange(len, torch::kFloat).unsqueeze(1);
    torch::Tensor div = torch::exp(torch::arange(0, hidden_, 2, torch::kFloat) *
                                   (-std::log(10000.0) / static_cast<double>(hidden_)));
    torch::Tensor pe = torch::zeros({len, hidden_});
    pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)},
                  torch::sin(pos * div));
    pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)},
                  torch::cos(pos * div).slice(1, 0, hidden_ / 2));
    positions_ = pe.unsqueeze(1);
  }

  int64_t hidden_;
  nn::Embedding src_embed_, tgt_embed_;
  nn::Transformer transformer_;
  nn::Linear project_;
  torch::Tensor positions_;
};

}  // namespace

std::shared_ptr<Seq2SeqModel> MakeGruAttentionModel(const ModelConfig& config) {
  return std::make_shared<GruAttentionModel>(config);
}

std::shared_ptr<Seq2SeqModel> MakeTransformerModel(const ModelConfig& config) {
  return std::make_shared<TransformerModel>(config);
}

}  // namespace seqpoint::examples
