// Runs the built seqpoint-train as a subprocess on the real fillets corpus: short real training
// runs of both models, the trace they write, seed determinism across thread counts, error exits
// and the USDT notes in the binary.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "common/trace_csv.h"

namespace {

const std::string kBinary = SEQPOINT_TRAIN_BINARY;
// Through the wrapper, as users run it: its thread and allocator settings are tested too.
const std::string kWrapper =
    "SEQPOINT_TRAIN=" + kBinary + " " + SEQPOINT_EXAMPLES_DIR + "/run-train.sh";
const std::string kCorpus = std::string(SEQPOINT_CORPORA_DIR) + "/ende_fillets.tsv";

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

RunResult RunCommand(const std::string& command) {
  RunResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string TempPath(const char* tag) {
  return "/tmp/seqpoint_train_test_" + std::string(tag) + "_" + std::to_string(getpid()) + ".csv";
}

seqpoint::Trace Train(const std::string& model, int iterations, int threads, const char* tag) {
  std::string trace = TempPath(tag);
  RunResult r =
      RunCommand(kWrapper + " --corpus " + kCorpus + " --model " + model + " --iterations " +
                 std::to_string(iterations) + " --threads " + std::to_string(threads) +
                 " --hidden 64 --seed 3 --log-every 10" + " --trace " + trace);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("loss") != std::string::npos);
  CHECK(r.output.find("warning") == std::string::npos);  // the wrapper set up everything
  auto t = seqpoint::LoadTrace(trace);
  std::remove(trace.c_str());
  REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  return std::move(*t);
}

void CheckTrace(const seqpoint::Trace& t, size_t rows) {
  REQUIRE(t.rows() == rows);
  CHECK(t.schema.has_batch);
  CHECK(t.schema.has_tokens);
  CHECK(t.schema.has_epoch);
  int time = t.MetricIndex("time_ns");
  REQUIRE(time >= 0);
  for (const char* m : {"task_clock_ns", "page_faults", "context_switches"}) {
    CHECK(t.MetricIndex(m) >= 0);
  }
  for (size_t i = 0; i < rows; ++i) {
    CHECK(t.iter[i] == i);
    CHECK(t.seq_len[i] >= 1);
    CHECK(t.batch[i] == 32);               // the default --batch-size; every batch is full
    CHECK(t.tokens[i] >= t.batch[i] * 2);  // every pair has a word on each side
    CHECK(t.metrics[size_t(time)][i] > 0);
  }
}

}  // namespace

TEST_CASE("examples train: 30 real iterations of the GRU model write a full trace") {
  CheckTrace(Train("gru", 30, 2, "gru"), 30);
}

TEST_CASE("examples train: 30 real iterations of the transformer model write a full trace") {
  CheckTrace(Train("transformer", 30, 2, "transformer"), 30);
}

TEST_CASE("examples train: the same seed gives the same seq_len sequence at 1 and 2 threads") {
  seqpoint::Trace one = Train("gru", 12, 1, "t1");
  seqpoint::Trace two = Train("gru", 12, 2, "t2");
  CHECK(one.seq_len == two.seq_len);
  CHECK(one.tokens == two.tokens);
}

TEST_CASE("examples train: a bad corpus or option exits non-zero with a clear message") {
  RunResult missing = RunCommand(kBinary + " --corpus /nonexistent/x.tsv --iterations 1");
  CHECK(missing.exit_code == 1);
  CHECK(missing.output.find("/nonexistent/x.tsv") != std::string::npos);
  CHECK(missing.output.find("run-train.sh") != std::string::npos);  // warns: no wrapper env
  RunResult big = RunCommand(kBinary + " --corpus " + kCorpus + " --batch-size 5000");
  CHECK(big.exit_code == 1);
  CHECK(big.output.find("lower --batch-size") != std::string::npos);
  RunResult usage = RunCommand(kBinary + " --corpus " + kCorpus + " --model lstm");
  CHECK(usage.exit_code == 2);
  CHECK(usage.output.find("gru or transformer") != std::string::npos);
}

TEST_CASE("examples train: an .xz corpus is read directly") {
  RunResult r = RunCommand(kWrapper + " --corpus " SEQPOINT_EXAMPLES_DATA_DIR
                                      "/ende_fillets.tsv.xz --iterations 2 --hidden 32");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("2 iterations") != std::string::npos);
}

TEST_CASE("examples train: the binary carries the seqpoint USDT notes") {
  RunResult r = RunCommand("readelf -n " + kBinary);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("Provider: seqpoint") != std::string::npos);
  CHECK(r.output.find("Name: iteration_begin") != std::string::npos);
  CHECK(r.output.find("Name: iteration_end") != std::string::npos);
}
