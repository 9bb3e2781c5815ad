// `seqpoint select | project | evaluate` as a user runs them: real files, real process, exit
// codes and messages. Bad input must give a message naming the file (and line/column) and a
// non-crash exit code.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/testing/scratch_dir.h"
#include "common/trace_csv.h"

namespace fs = std::filesystem;

namespace {

struct Run {
  int code = -1;
  std::string out;
};

Run Cli(const std::string& args) {
  std::string cmd = std::string(SEQPOINT_CLI) + " " + args + " 2>&1";
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// A scratch directory (common/testing) where `d / "name"` is a file's path in it.
struct TempDir : seqpoint::testing::ScratchDir {
  std::string operator/(const std::string& name) const { return File(name); }
};

// A run shaped like bucketed training: skewed SLs, time linear in padded tokens plus noise.
void WriteRun(const std::string& path, size_t n, uint64_t seed, double speed = 1.0) {
  seqpoint::TraceSchema s;
  s.has_batch = s.has_tokens = true;
  s.metrics = {"time_ns"};
  auto w = seqpoint::TraceWriter::Create(path, s);
  REQUIRE(w.ok());
  std::mt19937_64 rng(seed), len_rng(7);
  std::lognormal_distribution<double> len(std::log(20.0), 0.6);
  std::normal_distribution<double> z(0, 0.05);
  for (size_t i = 0; i < n; ++i) {
    uint32_t sl = static_cast<uint32_t>(std::clamp(std::round(len(len_rng)), 1.0, 150.0));
    double t = (2e5 + 1e3 * sl * 32) * (1 + z(rng)) / speed;
    seqpoint::TraceRow r;
    r.iter = i;
    r.seq_len = sl;
    r.batch = 32;
    r.tokens = sl * 30;
    r.metrics = std::span<const double>(&t, 1);
    REQUIRE((*w)->Append(r).ok());
  }
}

}  // namespace

TEST_CASE("cli: select -> project round trip on a real file") {
  TempDir d;
  WriteRun(d / "run.csv", 20000, 1);
  Run sel = Cli("select --trace " + (d / "run.csv") + " --budget 100 --json --out " + (d / "sel.json"));
  REQUIRE(sel.code == 0);
  Run proj = Cli("project --selection " + (d / "sel.json") + " --measured " + (d / "run.csv") + " --json");
  REQUIRE(proj.code == 0);
  CHECK(proj.out.find("\"time_ns\"") != std::string::npos);
  CHECK(proj.out.find("\"low\"") != std::string::npos);
  Run table = Cli("select --trace " + (d / "run.csv") + " --budget 100");
  CHECK(table.code == 0);
  CHECK(table.out.find("100 iterations to measure") != std::string::npos);
}

TEST_CASE("cli: project reads only the SeqPoints' rows, a measured file of just those works") {
  TempDir d;
  WriteRun(d / "run.csv", 5000, 2);
  REQUIRE(Cli("select --trace " + (d / "run.csv") + " --budget 30 --json --out " + (d / "sel.json")).code == 0);
  // Keep the header and only the selected rows; every other row becomes garbage-free but absent.
  auto t = seqpoint::LoadTrace(d / "run.csv");
  REQUIRE(t.ok());
  std::ifstream in(d / "sel.json");
  std::string json((std::istreambuf_iterator<char>(in)), {});
  std::string only = "iter,seq_len,batch,tokens,time_ns\n";
  for (size_t i = 0; i < t->rows(); ++i) {
    std::string needle = std::to_string(t->iter[i]);
    bool listed = false;
    for (size_t pos = json.find(needle); pos != std::string::npos; pos = json.find(needle, pos + 1)) {
      char before = json[pos - 1], after = json[pos + needle.size()];
      if ((before == ' ' || before == '[') && (after == ',' || after == '\n' || after == ']')) listed = true;
    }
    if (listed) {
      only += std::to_string(t->iter[i]) + "," + std::to_string(t->seq_len[i]) + ",32," +
              std::to_string(t->tokens[i]) + "," + std::to_string(t->metrics[0][i]) + "\n";
    }
  }
  std::string measured = d.Write("measured.csv", only);
  Run proj = Cli("project --selection " + (d / "sel.json") + " --measured " + measured);
  CHECK(proj.code == 0);
  CHECK(proj.out.find("time_ns") != std::string::npos);
}

TEST_CASE("cli: evaluate prints projections, baselines and speedup") {
  TempDir d;
  WriteRun(d / "a.csv", 20000, 3, 1.0);
  WriteRun(d / "b.csv", 20000, 4, 1.6);
  Run r = Cli("evaluate --trace " + (d / "a.csv") + " --compare " + (d / "b.csv"));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("1/200 of the run") != std::string::npos);
  CHECK(r.out.find("uniform stride") != std::string::npos);
  CHECK(r.out.find("speedup") != std::string::npos);
  Run j = Cli("evaluate --trace " + (d / "a.csv") + " --online --json");
  REQUIRE(j.code == 0);
  CHECK(j.out.find("\"seqpoint-online\"") != std::string::npos);
}

TEST_CASE("cli: bad traces give a clear error with file, line and column, never a crash") {
  TempDir d;
  struct Case {
    const char* name;
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"empty.csv", "", "the trace is empty"},
      {"nosl.csv", "iter,time_ns\n0,5\n", "no 'seq_len' column"},
      {"zero.csv", "seq_len,time_ns\n5,1\n0,1\n", "zero.csv:3: column 1 ('seq_len'): must be >= 1"},
      {"neg.csv", "seq_len\n-4\n", "neg.csv:2: column 1 ('seq_len')"},
      {"word.csv", "iter,seq_len\n0,long\n", "word.csv:2: column 2 ('seq_len'): expected an integer"},
      {"short.csv", "iter,seq_len,batch\n0,5\n", "column 3 ('batch') is missing"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    std::string path = d.Write(c.name, c.text);
    Run r = Cli("select --trace " + path + " --budget 5");
    CHECK(r.code == 1);
    CHECK(r.out.find(c.expect) != std::string::npos);
  }
  Run missing = Cli("select --trace " + (d / "nope.csv"));
  CHECK(missing.code == 1);
  CHECK(missing.out.find("nope.csv") != std::string::npos);
  Run usage = Cli("select --budget 5");
  CHECK(usage.code == 2);
  CHECK(usage.out.find("--trace") != std::string::npos);
  Run badnum = Cli("select --trace x --budget lots");
  CHECK(badnum.code == 2);
  CHECK(badnum.out.find("'lots'") != std::string::npos);
}

TEST_CASE("cli: CRLF line endings are read like LF") {
  TempDir d;
  std::string text = "iter,seq_len,time_ns\r\n";
  for (int i = 0; i < 500; ++i) text += std::to_string(i) + "," + std::to_string(5 + i % 7) + ",100\r\n";
  Run r = Cli("evaluate --trace " + d.Write("crlf.csv", text) + " --budget 20");
  CHECK(r.code == 0);
  CHECK(r.out.find("time_ns") != std::string::npos);
}

TEST_CASE("cli: a selection that does not match the measured file is refused, naming both") {
  TempDir d;
  WriteRun(d / "run.csv", 3000, 5);
  REQUIRE(Cli("select --trace " + (d / "run.csv") + " --budget 20 --json --out " + (d / "sel.json")).code == 0);
  std::string other = d.Write("other.csv", "iter,seq_len,time_ns\n0,1,5\n1,999,5\n");
  Run r = Cli("project --selection " + (d / "sel.json") + " --measured " + other);
  CHECK(r.code == 1);
  CHECK((r.out.find("has no row for") != std::string::npos || r.out.find("not from the run") != std::string::npos));
  // Same rows, but SLs shifted: a different run.
  auto t = seqpoint::LoadTrace(d / "run.csv");
  REQUIRE(t.ok());
  std::string shifted = "iter,seq_len,time_ns\n";
  for (size_t i = 0; i < t->rows(); ++i)
    shifted += std::to_string(i) + "," + std::to_string(t->seq_len[i] + 500) + ",5\n";
  Run r2 = Cli("project --selection " + (d / "sel.json") + " --measured " + d.Write("shifted.csv", shifted));
  CHECK(r2.code == 1);
  CHECK(r2.out.find("not from the run the selection was made for") != std::string::npos);
  CHECK(r2.out.find("shifted.csv:") != std::string::npos);
  Run r3 = Cli("project --selection " + d.Write("bad.json", "{oops") + " --measured " + (d / "run.csv"));
  CHECK(r3.code == 1);
  CHECK(r3.out.find("bad.json: not valid JSON") != std::string::npos);
  Run r4 = Cli("evaluate --trace " + (d / "run.csv") + " --compare " + other);
  CHECK(r4.code == 1);
  CHECK(r4.out.find("--compare needs the same run") != std::string::npos);
}

TEST_CASE("cli: a 2-million-row trace streams through select in bounded memory") {
  TempDir d;
  WriteRun(d / "big.csv", 2'000'000, 6);
  Run r = Cli("select --trace " + (d / "big.csv") + " --budget 10000 --json --out " + (d / "sel.json"));
  CHECK(r.code == 0);
  Run o = Cli("select --trace " + (d / "big.csv") + " --online --budget-fraction 0.001 --json --out " +
              (d / "sel2.json"));
  CHECK(o.code == 0);
}

// Real PyTorch runs (tests/data/online/README.md) through `evaluate --online`: the code
// seqpointd runs, fed every iteration's time.
TEST_CASE("cli: evaluate --online finds a mid-run slowdown and projects CPU time through it") {
  const std::string trace = seqpoint::testing::SourceDir() + "/tests/data/online/gru_random_slow_s1.csv";
  Run r = Cli("evaluate --trace " + trace + " --online --json");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  auto j = nlohmann::json::parse(r.out);
  const auto& cpu = j["metrics"]["cpu_ns"];
  const auto& time = j["metrics"]["time_ns"];
  INFO(r.out);
  CHECK(cpu["covered"].get<bool>());
  CHECK(std::fabs(cpu["error_pct"].get<double>()) < 3);
  // time_ns as if not timed on every iteration: the self-check (a 95% interval may miss).
  CHECK(std::fabs(time["error_pct"].get<double>()) < 5);
  CHECK(time["time_strata"]["changes"].get<int>() >= 1);
  CHECK(j["measured"].get<int>() < 200);  // 16 per doubling + 8 per change, of 1,000
  CHECK(cpu["steady_state"]["projected"].get<double>() <= cpu["projected"].get<double>());
}

TEST_CASE("cli: evaluate --online on a bucketed run: intervals hold both metrics") {
  const std::string trace = seqpoint::testing::SourceDir() + "/tests/data/online/lstm_bucketed_s1.csv";
  Run r = Cli("evaluate --trace " + trace + " --online --json");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  auto j = nlohmann::json::parse(r.out);
  INFO(r.out);
  for (const char* m : {"time_ns", "cpu_ns"}) {
    CHECK(j["metrics"][m]["covered"].get<bool>());
    CHECK(j["metrics"][m]["low"].get<double>() >= 0);
  }
}

// Issue 15: the messages a new user hit.
TEST_CASE("cli: a negative seq_len is refused as zero is, naming file, line and column") {
  TempDir d;
  Run neg = Cli("select --trace " + d.Write("neg.csv", "seq_len,time_ns\n5,1\n-5,1\n") + " --budget 5");
  CHECK(neg.code == 1);
  CHECK(neg.out.find("neg.csv:3: column 1 ('seq_len'): must be >= 1, got '-5'") !=
        std::string::npos);
  CHECK(neg.out.find("expected an integer") == std::string::npos);
  Run zero = Cli("select --trace " + d.Write("zero.csv", "seq_len,time_ns\n0,1\n") + " --budget 5");
  CHECK(zero.out.find("zero.csv:2: column 1 ('seq_len'): must be >= 1, got '0'") !=
        std::string::npos);
  Run tokens = Cli("select --trace " + d.Write("tok.csv", "seq_len,tokens\n5,-2\n") + " --budget 5");
  CHECK(tokens.out.find("tok.csv:2: column 2 ('tokens'): must be >= 0") != std::string::npos);
}

TEST_CASE("cli: a semicolon- or tab-separated trace is named as such, with the fix") {
  TempDir d;
  Run s = Cli("select --trace " + d.Write("s.csv", "iter;seq_len;time_ns\n0;5;1\n") + " --budget 5");
  CHECK(s.code == 1);
  CHECK(s.out.find("no 'seq_len' column") != std::string::npos);
  CHECK(s.out.find("looks semicolon-separated") != std::string::npos);
  CHECK(s.out.find("commas (docs/trace-csv.md)") != std::string::npos);
  Run t = Cli("select --trace " + d.Write("t.csv", "iter\tseq_len\ttime_ns\n0\t5\t1\n") + " --budget 5");
  CHECK(t.code == 1);
  CHECK(t.out.find("looks tab-separated") != std::string::npos);
  Run plain = Cli("select --trace " + d.Write("p.csv", "iter,time_ns\n0,1\n") + " --budget 5");
  CHECK(plain.out.find("-separated") == std::string::npos);
}

TEST_CASE("cli: --budget and --target-error together are refused as alternatives") {
  TempDir d;
  WriteRun(d / "run.csv", 2000, 7);
  Run r = Cli("select --trace " + (d / "run.csv") + " --budget 8 --target-error 1");
  CHECK(r.code == 2);
  CHECK(r.out.find("--budget and --target-error are alternatives") != std::string::npos);
  Run e = Cli("evaluate --trace " + (d / "run.csv") + " --budget-fraction 0.01 --target-error 1");
  CHECK(e.code == 2);
  CHECK(e.out.find("--budget-fraction and --target-error are alternatives") != std::string::npos);
  CHECK(Cli("select --trace " + (d / "run.csv") + " --target-error 1").code == 0);
}

TEST_CASE("cli: a budget too small for the SL bins gives a warning naming the budget to use") {
  const std::string trace = seqpoint::testing::SourceDir() + "/tests/data/agent/gru_debian_1500.csv";
  Run s = Cli("select --trace " + trace + " --budget 1");
  CHECK(s.code == 0);
  CHECK(s.out.find("seqpoint select: warning: a budget of 1 measured iteration is less than 2 per SL "
                   "bin") != std::string::npos);
  CHECK(s.out.find("rough") != std::string::npos);
  CHECK(s.out.find("use --budget 46 or more") != std::string::npos);
  Run e = Cli("evaluate --trace " + trace + " --budget 1");
  CHECK(e.code == 0);
  CHECK(e.out.find("seqpoint evaluate: warning: a budget of 1") != std::string::npos);
  Run enough = Cli("evaluate --trace " + trace + " --budget 50");
  CHECK(enough.code == 0);
  CHECK(enough.out.find("warning") == std::string::npos);
  Run target = Cli("select --trace " + trace + " --target-error 1");
  CHECK(target.out.find("warning") == std::string::npos);
}

TEST_CASE("cli: project names a missing selection file, the reason and what to run") {
  TempDir d;
  WriteRun(d / "run.csv", 500, 8);
  Run r = Cli("project --selection " + (d / "sel.json") + " --measured " + (d / "run.csv"));
  CHECK(r.code == 1);
  CHECK(r.out.find("cannot open selection '" + (d / "sel.json") + "': No such file or directory") !=
        std::string::npos);
  CHECK(r.out.find("seqpoint select --trace TRACE --budget N --json > " + (d / "sel.json")) !=
        std::string::npos);
}

TEST_CASE("cli: --help shows what each option's value is, not VALUE") {
  struct Case {
    const char* command;
    std::vector<const char*> expect;
  };
  const Case cases[] = {
      {"select", {"--trace FILE", "--budget N", "--budget-fraction F", "--target-error P", "--out FILE",
                  "--max-bins N", "with --online: at most this fraction"}},
      {"evaluate", {"--trace FILE", "--compare FILE", "--metric NAME", "--budget-fraction F",
                    "offline it becomes --budget floor(F x iterations)"}},
      {"project", {"--selection FILE", "--measured FILE", "--compare FILE"}},
      {"probe", {"--pid PID", "--duration S", "--out FILE", "--max-seq-len N"}},
      {"gpu", {"--sysfs-root DIR"}},
      {"status", {"--socket PATH"}},
      {"runs", {"--limit N"}},
      {"report", {"--days N"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.command);
    Run r = Cli(std::string(c.command) + " --help");
    CHECK(r.code == 0);
    CHECK(r.out.find(" VALUE") == std::string::npos);
    for (const char* e : c.expect) {
      CAPTURE(e);
      CHECK(r.out.find(e) != std::string::npos);
    }
  }
}

TEST_CASE("cli: evaluate and project print times in seconds and energy in joules, JSON as read") {
  const std::string trace = seqpoint::testing::SourceDir() + "/tests/data/agent/gru_debian_1500.csv";
  Run e = Cli("evaluate --trace " + trace + " --budget 50");
  REQUIRE(e.code == 0);
  CHECK(e.out.find("e+11") == std::string::npos);
  CHECK(e.out.find("456.727 s") != std::string::npos);  // 4.56727e+11 ns
  CHECK(e.out.find("[369.360 s, 544.094 s]") != std::string::npos);  // exact t quantile
  Run j = Cli("evaluate --trace " + trace + " --budget 50 --json");
  REQUIRE(j.code == 0);
  auto json = nlohmann::json::parse(j.out);
  CHECK(json["metrics"]["time_ns"]["projected"].get<double>() > 4e11);

  TempDir d;
  std::string text = "iter,seq_len,time_ns,energy_uj\n";
  for (int i = 0; i < 400; ++i) {
    int sl = 5 + i % 9;
    text += std::to_string(i) + "," + std::to_string(sl) + "," + std::to_string(2000000 * sl) + "," +
            std::to_string(150000 * sl) + "\n";
  }
  std::string run = d.Write("energy.csv", text);
  Run ev = Cli("evaluate --trace " + run + " --budget 40");
  REQUIRE_MESSAGE(ev.code == 0, ev.out);
  CHECK(ev.out.find("7.180 s") != std::string::npos);    // 7.18e9 ns
  CHECK(ev.out.find("538.500 J") != std::string::npos);  // 5.385e8 uJ
  REQUIRE(Cli("select --trace " + run + " --budget 40 --json --out " + (d / "sel.json")).code == 0);
  Run p = Cli("project --selection " + (d / "sel.json") + " --measured " + run);
  REQUIRE_MESSAGE(p.code == 0, p.out);
  CHECK(p.out.find(" s ") != std::string::npos);
  CHECK(p.out.find(" J ") != std::string::npos);
  Run pj = Cli("project --selection " + (d / "sel.json") + " --measured " + run + " --json");
  REQUIRE(pj.code == 0);
  CHECK(nlohmann::json::parse(pj.out)["metrics"]["energy_uj"]["total"].get<double>() > 1e8);
}
