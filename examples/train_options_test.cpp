// Command-line parsing of seqpoint-train.
#include "examples/train_options.h"

#include <doctest/doctest.h>

#include <vector>

using namespace seqpoint::examples;

namespace {

seqpoint::Result<TrainOptions> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "seqpoint-train");
  return ParseTrainOptions(static_cast<int>(args.size()), args.data());
}

std::string ErrorOf(std::vector<const char*> args) {
  auto r = Parse(std::move(args));
  return r.ok() ? "" : r.status().message();
}

}  // namespace

TEST_CASE("examples train options: defaults and values") {
  auto d = Parse({"--corpus", "c.tsv"});
  REQUIRE(d.ok());
  CHECK(d->model == "gru");
  CHECK(d->batching.mode == BatchingMode::kBucket);
  CHECK(d->iterations == 0);
  CHECK(d->seed == 1);

  auto o = Parse({"--corpus=c.tsv",
                  "--model",
                  "transformer",
                  "--batching",
                  "random",
                  "--batch-size",
                  "32",
                  "--iterations",
                  "100",
                  "--seed",
                  "9",
                  "--threads",
                  "2",
                  "--hidden",
                  "128",
                  "--heads",
                  "4",
                  "--max-len",
                  "50",
                  "--vocab",
                  "4000",
                  "--trace",
                  "t.csv",
                  "--dropout",
                  "0"});
  REQUIRE(o.ok());
  CHECK(o->model == "transformer");
  CHECK(o->batching.mode == BatchingMode::kRandom);
  CHECK(o->batching.batch_size == 32);
  CHECK(o->batching.seed == 9);
  CHECK(o->iterations == 100);
  CHECK(o->threads == 2);
  CHECK(o->corpus_options.max_len == 50);
  CHECK(o->corpus_options.max_words == 4000);
  CHECK(o->trace == "t.csv");
  CHECK(Parse({"--help"})->help);
}

TEST_CASE("examples train options: errors name the option") {
  CHECK(ErrorOf({}).find("--corpus") != std::string::npos);
  CHECK(ErrorOf({"--corpus", "c", "--model", "lstm"}).find("--model 'lstm'") != std::string::npos);
  CHECK(ErrorOf({"--corpus", "c", "--batching", "sorted"}).find("bucket or random") !=
        std::string::npos);
  CHECK(ErrorOf({"--corpus", "c", "--threads", "0"}).find("--threads") != std::string::npos);
  CHECK(ErrorOf({"--corpus", "c", "--iterations", "-5"}).find("--iterations") != std::string::npos);
  CHECK(ErrorOf({"--corpus", "c", "--frobnicate"}).find("unknown option '--frobnicate'") !=
        std::string::npos);
  CHECK(ErrorOf({"--corpus"}).find("needs a value") != std::string::npos);
  CHECK(ErrorOf({"--corpus", "c", "--model", "transformer", "--hidden", "100", "--heads", "3"})
            .find("multiple of --heads") != std::string::npos);
}
