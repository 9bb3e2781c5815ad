// The seqpointd binary as an operator runs it: --check-config, SIGTERM, SIGHUP, SIGKILL and
// restart. Replays the recorded trace (the live eBPF path is covered by the e2e test).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "agent/store/store.h"
#include "agent/testing/seqpointd_process.h"
#include "agent/testing/test_harness.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

// Runs seqpointd with `args` to completion; returns exit status and stdout+stderr.
std::pair<int, std::string> RunToExit(const std::string& args) {
  std::string cmd = SeqpointdBinary() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

}  // namespace

TEST_CASE("agent seqpointd: --check-config accepts a good file and names the key of a bad one") {
  TempDir dir;
  auto [ok, ok_out] =
      RunToExit("--check-config --config " + dir.Write("good.toml", "[runs]\nbudget = 8\n"));
  CHECK(ok == 0);
  CHECK(ok_out.find("OK") != std::string::npos);
  auto [bad, bad_out] = RunToExit("--check-config --config " +
                                  dir.Write("bad.toml", "[runs]\nbudget = 8\nwarmup = \"x\"\n"));
  CHECK(bad == 2);
  CHECK(bad_out.find("bad.toml:3:1: unknown key 'runs.warmup'") != std::string::npos);
  auto [type, type_out] = RunToExit("--check-config --config " +
                                    dir.Write("type.toml", "[upload]\ninterval_s = \"5s\"\n"));
  CHECK(type == 2);
  CHECK(type_out.find("'upload.interval_s' must be an integer") != std::string::npos);
  auto [missing, missing_out] = RunToExit("--check-config --config " + dir.File("none.toml"));
  CHECK(missing == 2);
  CHECK(RunToExit("--bogus").first == 2);
  CHECK(RunToExit("--help").first == 0);
  auto [defaults, text] = RunToExit("--print-default-config");
  CHECK(defaults == 0);
  CHECK(text.find("# budget = 4096") != std::string::npos);
  CHECK(text.find("# budget_per_doubling = 16") != std::string::npos);
}

TEST_CASE("agent seqpointd: --check-config refuses a misspelt perf event, naming the nearest") {
  TempDir dir;
  auto [bad, out] =
      RunToExit("--check-config --config " +
                dir.Write("perf.toml", "[collectors.perf]\nevents = [\"task-clok\"]\n"));
  CHECK(bad == 2);
  CHECK(out.find("perf.toml:2:11: key 'collectors.perf.events': unknown perf event "
                 "\"task-clok\"; nearest valid name: \"task-clock\"") != std::string::npos);
  auto [good, good_out] =
      RunToExit("--check-config --config " +
                dir.Write("ok.toml", "[collectors.perf]\nevents = [\"task-clock\", \"r00c0\"]\n"));
  CHECK(good == 0);
  auto [action, action_out] =
      RunToExit("--check-config --config " +
                dir.Write("action.toml", "[runs]\nobserver_effect_action = \"dorp\"\n"));
  CHECK(action == 2);
  CHECK(action_out.find("action.toml:2:26: key 'runs.observer_effect_action'") !=
        std::string::npos);
}

TEST_CASE("agent seqpointd: a directory, /dev/zero or a FIFO as --config exits 2 at once") {
  TempDir dir;
  auto [d, d_out] = RunToExit("--config " + dir.path() + " --state-dir " + dir.File("state") +
                              " --runtime-dir " + dir.File("run") + " --metrics-listen ''");
  CHECK(d == 2);
  CHECK(d_out.find("is a directory, not a regular file") != std::string::npos);
  auto [z, z_out] = RunToExit("--check-config --config /dev/zero");
  CHECK(z == 2);
  CHECK(z_out.find("is a character device") != std::string::npos);
  std::string fifo = dir.File("fifo.toml");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  auto [f, f_out] = RunToExit("--check-config --config " + fifo);
  CHECK(f == 2);
  CHECK(f_out.find("is a FIFO") != std::string::npos);
}

TEST_CASE("agent seqpointd: a damaged state.db is moved aside and said, with no restart loop") {
  TempDir dir;
  std::filesystem::create_directories(dir.File("state"));
  dir.Write("state/state.db", std::string(8192, 'x'));  // "file is not a database"
  Seqpointd d(dir,
              {"--replay", RecordedTrace() + "@job", "--replay-rows", "50", "--replay-no-exit"},
              "damaged.log");
  REQUIRE(d.Ready());
  CHECK(d.Log().find("was damaged") != std::string::npos);
  CHECK(d.Log().find("moved it aside to '" + dir.File("state/state.db.corrupt-")) !=
        std::string::npos);
  CHECK(d.Metrics().find("seqpoint_store_recoveries_total{reason=\"damaged\"} 1") !=
        std::string::npos);
  d.Signal(SIGTERM);
  CHECK(d.Wait() == 0);
}

TEST_CASE("agent seqpointd: a state directory and state.db it creates are private") {
  TempDir dir;
  mode_t old = umask(022);
  Seqpointd d(dir,
              {"--replay", RecordedTrace() + "@job", "--replay-rows", "50", "--replay-no-exit"},
              "private.log");
  umask(old);
  REQUIRE(d.Ready());
  struct stat st {};
  REQUIRE(stat(dir.File("state").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(stat(dir.File("state/state.db").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(d.Metrics().find("seqpoint_store_recoveries_total{reason=\"damaged\"} 0") !=
        std::string::npos);
  d.Signal(SIGTERM);
  CHECK(d.Wait() == 0);
}

TEST_CASE("agent seqpointd: a second daemon on the same state directory exits, naming the first") {
  TempDir dir;
  Seqpointd first(dir,
                  {"--replay", RecordedTrace() + "@job", "--replay-rows", "50", "--replay-no-exit"},
                  "first.log");
  REQUIRE(first.Ready());
  json status = first.Request("status");
  REQUIRE(status.is_object());
  const std::string pid = std::to_string(status["pid"].get<int64_t>());
  auto [rc, out] = RunToExit("--state-dir " + dir.File("state") + " --runtime-dir " +
                             dir.File("run2") + " --metrics-listen ''");
  CHECK(rc == 1);
  CHECK(out.find("state directory '" + dir.File("state") +
                 "' is in use by another seqpointd (pid " + pid + ",") != std::string::npos);
  // The first goes on undisturbed.
  CHECK(first.Request("status").is_object());
  first.Signal(SIGTERM);
  CHECK(first.Wait() == 0);
}

TEST_CASE("agent seqpointd: SIGTERM flushes state and exits 0, the run stays active to resume") {
  TempDir dir;
  Seqpointd d(dir,
              {"--replay", RecordedTrace() + "@job", "--replay-rows", "400", "--replay-no-exit"},
              "a.log");
  REQUIRE(d.Ready());
  REQUIRE(WaitFor([&] {
    json s = d.Show("job");
    return s.is_object() && s["run"]["iterations"] == 400;
  }));
  d.Signal(SIGTERM);
  CHECK(d.Wait() == 0);
  CHECK(d.Log().find("flushing state") != std::string::npos);
  auto store = Store::Open(dir.path() + "/state/state.db");
  REQUIRE(store.ok());
  auto runs = (*store)->ListRuns(true, 10);
  REQUIRE(runs->size() == 1);
  CHECK((*runs)[0].iterations == 400);
  CHECK(!(*(*store)->LoadIterationLog((*runs)[0].id)).empty());
}

TEST_CASE("agent seqpointd: SIGHUP reloads, a bad file is refused and the old config kept") {
  TempDir dir;
  std::string config = dir.Write("seqpointd.toml", "[daemon]\nlog_level = \"info\"\n");
  Seqpointd d(dir, {"--config", config, "--replay", RecordedTrace() + "@hup", "--replay-no-exit"},
              "hup.log");
  REQUIRE(d.Ready());
  dir.Write("seqpointd.toml", "[daemon]\nlog_level = \"info\"\nbogus = 1\n");
  d.Signal(SIGHUP);
  REQUIRE(
      WaitFor([&] { return d.Log().find("failed, nothing was changed") != std::string::npos; }));
  CHECK(d.Log().find("unknown key 'daemon.bogus'") != std::string::npos);
  CHECK(d.Metrics().find("seqpoint_config_reloads_total 0") != std::string::npos);
  dir.Write("seqpointd.toml", "[daemon]\nlog_level = \"debug\"\n[runs]\nbudget = 10\n");
  d.Signal(SIGHUP);
  REQUIRE(WaitFor(
      [&] { return d.Metrics().find("seqpoint_config_reloads_total 1") != std::string::npos; }));
  d.Signal(SIGTERM);
  CHECK(d.Wait() == 0);
}

TEST_CASE("agent seqpointd: killed with SIGKILL mid-run and restarted, the run continues") {
  TempDir dir;
  int64_t run_id = 0;
  uint64_t before = 0;
  {
    Seqpointd d(dir, {"--replay", RecordedTrace() + "@job", "--replay-delay-us", "20000"},
                "first.log");
    REQUIRE(d.Ready());
    REQUIRE(WaitFor([&] {
      json s = d.Show("job");
      return s.is_object() && s["run"]["iterations"] >= 300;
    }));
    json s = d.Show("job");
    run_id = s["run"]["id"];
    before = s["run"]["iterations"];
    d.Signal(SIGKILL);
    CHECK(d.Wait() == 128 + SIGKILL);
  }
  // The trainer went on meanwhile: the restarted agent sees it from iteration 800 on.
  Seqpointd d(dir, {"--replay", RecordedTrace() + "@job", "--replay-from-row", "800"},
              "second.log");
  REQUIRE(d.Ready());
  json run;
  REQUIRE(WaitFor([&] {
    run = d.Show(std::to_string(run_id));
    return run.is_object() && run["run"]["state"] == "finished";
  }));
  CHECK(d.Log().find("resumed run " + std::to_string(run_id)) != std::string::npos);
  uint64_t iterations = run["run"]["iterations"];
  uint64_t unobserved = run["run"]["unobserved"];
  CHECK(iterations >= 700);
  CHECK(iterations < before + 700 + 1);
  // Every index is either observed or counted as missed: nothing silently lost.
  CHECK(iterations + unobserved == 1500);
  CHECK(run["projections"].contains("task_clock_ns"));
  d.Signal(SIGTERM);
  CHECK(d.Wait() == 0);
}

TEST_CASE("agent cli: seqpoint status, runs, show and report against a running seqpointd") {
  TempDir dir;
  Seqpointd d(dir, {"--replay", RecordedTrace() + "@cli-run", "--replay-rows", "300"}, "cli.log");
  REQUIRE(d.Ready());
  REQUIRE(!d.ClosedRun("cli-run").is_null());
  const std::string cli = BinaryDir() + "/agent/cli/seqpoint";
  const std::string socket = " --socket " + dir.path() + "/run/control.sock";
  auto run = [&](const std::string& args) {
    std::string cmd = cli + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int status = pclose(p);
    return std::make_pair(WEXITSTATUS(status), out);
  };
  auto [st, status] = run("status" + socket);
  CHECK(st == 0);
  CHECK(status.find("probes    replay") != std::string::npos);
  auto [rs, runs] = run("runs --all" + socket);
  CHECK(rs == 0);
  CHECK(runs.find("cli-run") != std::string::npos);
  auto [ss, show] = run("show cli-run" + socket);
  CHECK(ss == 0);
  CHECK(show.find("SL histogram") != std::string::npos);
  CHECK(show.find("SeqPoints") != std::string::npos);
  CHECK(show.find("self-check") != std::string::npos);
  auto [js, json_text] = run("show cli-run --json" + socket);
  CHECK(js == 0);
  json j = json::parse(json_text, nullptr, false);
  REQUIRE(!j.is_discarded());
  CHECK(j["run"]["iterations"] == 300);
  auto [ps, report] = run("report cli-run --days 7" + socket);
  CHECK(ps == 0);
  CHECK(report.find("by day") != std::string::npos);
  auto [ns, missing] = run("show no-such-run" + socket);
  CHECK(ns == 1);
  CHECK(missing.find("no run 'no-such-run'") != std::string::npos);
  CHECK(run("show" + socket).first == 2);
  CHECK(run("runs --limit zero" + socket).first == 2);
  auto [ds, down] = run("status --socket " + dir.path() + "/nothing.sock");
  CHECK(ds == 1);
  CHECK(down.find("cannot reach seqpointd") != std::string::npos);
}
