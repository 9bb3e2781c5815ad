#include "common/trace_csv.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

using seqpoint::ParseTrace;
using seqpoint::Status;
using seqpoint::TraceRow;
using seqpoint::TraceSchema;

namespace {

struct Collected {
  TraceSchema schema;
  std::vector<TraceRow> rows;
  std::vector<std::vector<double>> metrics;
};

Status Parse(std::string_view text, Collected* out) {
  return ParseTrace(
      text, "t.csv", {},
      [&](const TraceSchema& s) {
        out->schema = s;
        return Status::Ok();
      },
      [&](const TraceRow& r) {
        out->rows.push_back(r);
        out->metrics.emplace_back(r.metrics.begin(), r.metrics.end());
        return Status::Ok();
      });
}

std::string ErrorOf(std::string_view text) {
  Collected c;
  Status st = Parse(text, &c);
  REQUIRE_FALSE(st.ok());
  return st.message();
}

}  // namespace

TEST_CASE("trace: full header, comments, empty metric cells") {
  Collected c;
  Status st = Parse(
      "# model gru\n"
      "iter,seq_len,batch,tokens,epoch,time_ns,papi:PAPI_TOT_INS\n"
      "0,37,64,1980,0,81234567,\n"
      "1,12,64,700,0,,5e6\n",
      &c);
  REQUIRE(st.ok());
  CHECK(c.schema.has_iter);
  CHECK(c.schema.has_batch);
  CHECK(c.schema.metrics == std::vector<std::string>{"time_ns", "papi:PAPI_TOT_INS"});
  REQUIRE(c.rows.size() == 2);
  CHECK(c.rows[0].seq_len == 37);
  CHECK(c.rows[1].tokens == 700);
  CHECK(c.metrics[0][0] == 81234567.0);
  CHECK(std::isnan(c.metrics[0][1]));
  CHECK(std::isnan(c.metrics[1][0]));
  CHECK(c.metrics[1][1] == 5e6);
}

TEST_CASE("trace: iter defaults to row order, CRLF line endings and spaces are accepted") {
  Collected c;
  REQUIRE(Parse("seq_len, time_ns\r\n5, 10\r\n6,11\r\n", &c).ok());
  REQUIRE(c.rows.size() == 2);
  CHECK(c.rows[1].iter == 1);
  CHECK(c.rows[1].seq_len == 6);
  CHECK(c.metrics[1][0] == 11.0);
}

TEST_CASE("trace: bad input names file, line and column") {
  CHECK(ErrorOf("").find("empty") != std::string::npos);
  CHECK(ErrorOf("# only a comment\n").find("empty") != std::string::npos);
  CHECK(ErrorOf("iter,time_ns\n0,5\n").find("no 'seq_len' column") != std::string::npos);
  CHECK(ErrorOf("seq_len\n0\n") == "t.csv:2: column 1 ('seq_len'): must be >= 1, got '0'");
  CHECK(ErrorOf("seq_len\n-3\n").find("t.csv:2: column 1 ('seq_len')") != std::string::npos);
  CHECK(ErrorOf("seq_len\nabc\n").find("expected an integer, got 'abc'") != std::string::npos);
  CHECK(ErrorOf("seq_len\n99999999999\n").find("out of range") != std::string::npos);
  CHECK(ErrorOf("iter,seq_len,time_ns\n0,5\n").find("column 3 ('time_ns') is missing") !=
        std::string::npos);
  CHECK(ErrorOf("seq_len,time_ns\n5,1,2\n").find("more than the 2 columns") != std::string::npos);
  CHECK(ErrorOf("seq_len,time_ns\n5,fast\n").find("t.csv:2: column 2 ('time_ns')") !=
        std::string::npos);
  CHECK(ErrorOf("seq_len,time_ns\n5,inf\n").find("finite") != std::string::npos);
  CHECK(ErrorOf("seq_len,seq_len\n").find("appears twice") != std::string::npos);
  CHECK(ErrorOf("seq_len,\n").find("has no name") != std::string::npos);
}

TEST_CASE("trace: writer output reads back identically") {
  char path[] = "/tmp/seqpoint_trace_testXXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  {
    TraceSchema s;
    s.has_batch = true;
    s.has_tokens = true;
    s.metrics = {"time_ns", "energy_uj"};
    auto w = seqpoint::TraceWriter::Create(path, s);
    REQUIRE(w.ok());
    REQUIRE((*w)->AppendComment("model gru\nthreads 2").ok());
    for (uint64_t i = 0; i < 1000; ++i) {
      double m[2] = {1e6 + static_cast<double>(i) * 0.5, i % 2 ? std::nan("") : 3.25};
      TraceRow r;
      r.iter = i;
      r.seq_len = static_cast<uint32_t>(1 + i % 50);
      r.batch = 64;
      r.tokens = 100 + i;
      r.metrics = m;
      REQUIRE((*w)->Append(r).ok());
    }
  }
  auto t = seqpoint::LoadTrace(path);
  REQUIRE(t.ok());
  CHECK(t->rows() == 1000);
  CHECK(t->seq_len[999] == 1 + 999 % 50);
  CHECK(t->metrics[0][999] == 1e6 + 999 * 0.5);
  CHECK(std::isnan(t->metrics[1][1]));
  CHECK(t->metrics[1][2] == 3.25);
  std::remove(path);
}

TEST_CASE("trace: a writer with no rows still writes the header, missing file is NotFound") {
  char path[] = "/tmp/seqpoint_trace_testXXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  { auto w = seqpoint::TraceWriter::Create(path, TraceSchema{}); REQUIRE(w.ok()); }
  auto t = seqpoint::LoadTrace(path);
  REQUIRE(t.ok());
  CHECK(t->rows() == 0);
  std::remove(path);
  auto missing = seqpoint::LoadTrace("/nonexistent/trace.csv");
  CHECK(missing.status().code() == seqpoint::ErrorCode::kNotFound);
  CHECK(missing.status().message().find("/nonexistent/trace.csv") != std::string::npos);
}
