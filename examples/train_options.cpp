// See train_options.h.
#include "examples/train_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace seqpoint::examples {
namespace {

Result<uint64_t> ParseCount(std::string_view name, const std::string& value, uint64_t min,
                            uint64_t max) {
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || value[0] == '-' || *end != '\0' || errno != 0 || v < min || v > max) {
    return InvalidArgument(std::string(name) + " '" + value + "' is not an integer in [" +
                           std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return static_cast<uint64_t>(v);
}

Result<double> ParseReal(std::string_view name, const std::string& value, double min, double max) {
  char* end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v) || v < min || v > max) {
    return InvalidArgument(std::string(name) + " '" + value + "' is not a number in [" +
                           std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return v;
}

constexpr std::string_view kOptionNames[] = {
    "--model",   "--corpus",     "--trace",  "--batching", "--batch-size", "--bucket-width",
    "--max-len", "--vocab",      "--hidden", "--layers",   "--heads",      "--dropout",
    "--lr",      "--iterations", "--epochs", "--seed",     "--threads",    "--log-every"};

bool IsKnownOption(std::string_view name) {
  for (std::string_view known : kOptionNames) {
    if (known == name) return true;
  }
  return false;
}

// Applies one "--name value"; returns an error naming the option.
Status Apply(TrainOptions& o, std::string_view name, const std::string& v) {
  auto count = [&](uint64_t min, uint64_t max, auto& out) -> Status {
    auto r = ParseCount(name, v, min, max);
    if (!r.ok()) return r.status();
    out = static_cast<std::remove_reference_t<decltype(out)>>(*r);
    return Status::Ok();
  };
  auto real = [&](double min, double max, double& out) -> Status {
    auto r = ParseReal(name, v, min, max);
    if (!r.ok()) return r.status();
    out = *r;
    return Status::Ok();
  };
  if (name == "--model") {
    if (v != "gru" && v != "transformer") {
      return InvalidArgument("--model '" + v + "' is not known; use gru or transformer");
    }
    o.model = v;
    return Status::Ok();
  }
  if (name == "--corpus") return o.corpus = v, Status::Ok();
  if (name == "--trace") return o.trace = v, Status::Ok();
  if (name == "--batching") {
    auto mode = ParseBatchingMode(v);
    if (!mode.ok()) return mode.status();
    o.batching.mode = *mode;
    return Status::Ok();
  }
  if (name == "--batch-size") return count(1, 1 << 16, o.batching.batch_size);
  if (name == "--bucket-width") return count(1, 1 << 16, o.batching.bucket_width);
  if (name == "--max-len") return count(1, 1 << 16, o.corpus_options.max_len);
  if (name == "--vocab") return count(1, 1 << 22, o.corpus_options.max_words);
  if (name == "--hidden") return count(8, 1 << 14, o.hidden);
  if (name == "--layers") return count(1, 64, o.layers);
  if (name == "--heads") return count(1, 256, o.heads);
  if (name == "--dropout") return real(0.0, 0.9, o.dropout);
  if (name == "--lr") return real(1e-7, 10.0, o.learning_rate);
  if (name == "--iterations") return count(1, UINT64_MAX, o.iterations);
  if (name == "--epochs") return count(1, UINT64_MAX, o.epochs);
  if (name == "--seed") return count(0, UINT64_MAX, o.seed);
  if (name == "--threads") return count(1, 1024, o.threads);
  if (name == "--log-every") return count(1, UINT64_MAX, o.log_every);
  return InvalidArgument("unknown option '" + std::string(name) + "'; see --help");
}

}  // namespace

const char* TrainUsage() {
  return "usage: seqpoint-train --corpus FILE [options]\n"
         "Trains an English->German sequence model on real text with libtorch (CPU) and\n"
         "writes one trace row per iteration (docs/trace-csv.md).\n\n"
         "  --corpus FILE        pairs English<TAB>German[<TAB>source], .tsv or .tsv.xz\n"
         "  --model NAME         gru (GRU encoder-decoder, Luong attention) | transformer [gru]\n"
         "  --trace FILE         write the iteration trace CSV here (\"-\" = stdout)\n"
         "  --batching MODE      bucket (GNMT-style length buckets) | random [bucket]\n"
         "  --batch-size N       sentences per batch [32]\n"
         "  --bucket-width N     source tokens per length bucket [5]\n"
         "  --max-len N          tokens kept per sentence, longer ones truncated [100]\n"
         "  --vocab N            words per language vocabulary, others are <unk> [8000]\n"
         "  --hidden N           model width [128]\n"
         "  --layers N           encoder and decoder layers [1]\n"
         "  --heads N            attention heads, transformer only [4]\n"
         "  --dropout P          [0.1]\n"
         "  --lr X               Adam learning rate [0.001]\n"
         "  --iterations N       stop after N iterations, cycling epochs as needed\n"
         "  --epochs N           stop after N epochs (with neither limit: 1 epoch)\n"
         "  --seed S             data order and initialisation [1]\n"
         "  --threads N          libtorch intra-op threads [one per CPU]\n"
         "  --log-every N        print the mean loss every N iterations to stderr [50]\n"
         "  --help\n";
}

Result<TrainOptions> ParseTrainOptions(int argc, const char* const* argv) {
  TrainOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      return o;
    }
    if (arg.substr(0, 2) != "--") {
      return InvalidArgument("unexpected argument '" + std::string(arg) + "'; see --help");
    }
    std::string value;
    size_t eq = arg.find('=');
    std::string_view name = arg.substr(0, eq);
    if (!IsKnownOption(name)) {
      return InvalidArgument("unknown option '" + std::string(name) + "'; see --help");
    }
    if (eq != std::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return InvalidArgument("option '" + std::string(name) + "' needs a value; see --help");
    }
    SEQPOINT_RETURN_IF_ERROR(Apply(o, name, value));
  }
  if (o.corpus.empty()) return InvalidArgument("--corpus FILE is required; see --help");
  if (o.model == "transformer" && o.hidden % o.heads != 0) {
    return InvalidArgument("--hidden " + std::to_string(o.hidden) +
                           " must be a multiple of --heads " + std::to_string(o.heads));
  }
  o.batching.seed = o.seed;
  return o;
}

}  // namespace seqpoint::examples
