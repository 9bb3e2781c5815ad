// Package upgrades and downgrades of seqpointd's state (docs/failure-modes.md), on a state
// directory the previous landed seqpointd left when it was SIGKILLed in the middle of a real
// probed run (tests/agent/fixtures/README.md says how it was made): schema v5, an active run
// with a checkpoint of the old layout and an iteration log of memcpy'd structs after it.
//  - Upgrade: this seqpointd migrates the file, resumes the run where the old one stopped and
//    goes on counting it; its log is then written in the explicit codec and read back.
//  - Downgrade: a file, a checkpoint or a log chunk from a NEWER seqpointd is never misread and
//    never stops the daemon: the file is moved aside (or used, when it says it is compatible),
//    the run is set aside with its reason in status, show and /metrics.
// In-process daemon on the recorded trace (the run's processes are gone; the replay stands for
// the trainer that went on).
#include <doctest/doctest.h>

#include <filesystem>

#include "agent/store/iteration_log_codec.h"
#include "agent/testing/test_harness.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

std::string Fixture() { return SourceDir() + "/tests/agent/fixtures/upgrade-v5/state.db"; }

// What the fixture holds, read with plain SQL (no migration).
struct FixtureFacts {
  int64_t schema = 0;
  int64_t run_id = 0;
  std::string key;
  int64_t iterations = 0;
  int64_t checkpoint_bytes = 0;
  int64_t log_entries = 0;
};

FixtureFacts Facts(const std::string& path) {
  FixtureFacts f;
  auto db = SqliteDb::Open(path);
  REQUIRE(db.ok());
  auto q = (*db)->Prepare(
      "SELECT (SELECT user_version FROM pragma_user_version), id, key, iterations, "
      "(SELECT COALESCE(SUM(LENGTH(data)), 0) FROM run_checkpoint), "
      "(SELECT COALESCE(SUM(entries), 0) FROM iteration_log) FROM runs WHERE state='active'");
  REQUIRE(q.ok());
  REQUIRE(*(*q)->Step());
  f.schema = (*q)->Int(0);
  f.run_id = (*q)->Int(1);
  f.key = (*q)->Text(2);
  f.iterations = (*q)->Int(3);
  f.checkpoint_bytes = (*q)->Int(4);
  f.log_entries = (*q)->Int(5);
  return f;
}

// A copy of the fixture as <dir>/state/state.db, changed by `sql` (with the old schema).
DaemonConfig StateFrom(const TempDir& dir, const std::vector<std::string>& sql = {}) {
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  std::filesystem::create_directories(cfg.state_dir);
  std::filesystem::copy_file(Fixture(), cfg.StateDbPath());
  auto db = SqliteDb::Open(cfg.StateDbPath());
  REQUIRE(db.ok());
  for (const std::string& s : sql) REQUIRE_MESSAGE((*db)->Exec(s).ok(), s);
  return cfg;
}

json RunOf(const json& runs, const std::string& key) {
  for (const json& r : runs["runs"]) {
    if (r["key"] == key) return r;
  }
  return json();
}

}  // namespace

TEST_CASE("upgrade: the previous version's state, killed mid-run, resumes here and goes on") {
  if (access(Fixture().c_str(), R_OK) != 0) {
    MESSAGE("skipped: no fixture " << Fixture());
    return;
  }
  TempDir dir;
  DaemonConfig cfg = StateFrom(dir);
  const FixtureFacts before = Facts(cfg.StateDbPath());
  MESSAGE("fixture: schema v" << before.schema << ", run " << before.run_id << " (" << before.key
                              << ") at " << before.iterations << " iterations, checkpoint "
                              << before.checkpoint_bytes << " bytes, " << before.log_entries
                              << " log entries after it");
  REQUIRE(before.schema == 5);
  REQUIRE(before.checkpoint_bytes > 0);
  REQUIRE(before.log_entries > 0);
  ReplaySpec spec;
  spec.traces = {RecordedTrace() + "@" + before.key};
  spec.max_rows = 400;
  spec.exit_at_end = false;  // the trainer goes on: the run stays active
  {
    DaemonHarness h;
    REQUIRE(h.Start(cfg, MakeDaemonParts(spec)).ok());
    REQUIRE(WaitFor([&] {
      auto s = h.Show(before.key);
      return s.ok() && (*s)["run"]["iterations"] == before.iterations + 400;
    }));
    auto s = h.Show(std::to_string(before.run_id));
    REQUIRE(s.ok());
    CHECK((*s)["run"]["state"] == "active");
    CHECK((*s)["run"]["id"] == before.run_id);  // the same run, not a new one
    CHECK(!(*s)["seqpoints"].empty());
    CHECK((*s)["projections"].contains("time_ns"));
    h.Stop();  // SIGTERM path: flushes, leaves the run active
  }
  {
    // Migrated: schema 6, the log after the resume in the explicit codec, all of it readable.
    auto store = Store::Open(cfg.StateDbPath());
    REQUIRE(store.ok());
    auto formats = (*store)->db().Prepare("SELECT DISTINCT format FROM iteration_log");
    REQUIRE(formats.ok());
    bool explicit_codec = false;
    while (*(*formats)->Step()) explicit_codec |= (*formats)->Int(0) == kIterationLogFormat;
    formats->reset();
    CHECK(explicit_codec);
    CHECK((*store)->LoadIterationLog(before.run_id).ok());
  }
  // And this version restarts on what it wrote itself; the run ends when its trainer does.
  ReplaySpec rest;
  rest.traces = {RecordedTrace() + "@" + before.key};
  rest.first_row = 400;
  rest.max_rows = 200;
  DaemonHarness h;
  REQUIRE(h.Start(cfg, MakeDaemonParts(rest)).ok());
  json run;
  REQUIRE(WaitFor([&] {
    auto runs = h.Runs(true);
    if (!runs.ok()) return false;
    run = RunOf(*runs, before.key);
    return !run.is_null() && run["state"] != "active";
  }));
  CHECK(run["id"] == before.run_id);
  CHECK(run["state"] == "finished");
  CHECK(run["iterations"] == before.iterations + 600);
}

TEST_CASE("downgrade: a database from a newer, incompatible seqpointd is moved aside, not fatal") {
  if (access(Fixture().c_str(), R_OK) != 0) return;
  TempDir dir;
  DaemonConfig cfg =
      StateFrom(dir, {"INSERT OR REPLACE INTO meta VALUES('oldest_compatible_schema', 99)",
                      "PRAGMA user_version = 99"});
  DaemonHarness h;
  REQUIRE(h.Start(cfg, ReplayParts(1)).ok());
  ControlRequest r;
  r.cmd = "status";
  auto status = h.Request(r);
  REQUIRE(status.ok());
  const json& rec = (*status)["store"]["recovered"];
  REQUIRE(rec.is_object());
  CHECK(rec["newer_schema"] == true);
  CHECK(std::filesystem::exists(rec["moved_to"].get<std::string>()));
  // The daemon measures new runs on its fresh database.
  CHECK(WaitFor([&] { return h.Show("job-0").ok(); }));
}

TEST_CASE("downgrade: a run whose checkpoint or log a newer seqpointd wrote is set aside") {
  if (access(Fixture().c_str(), R_OK) != 0) return;
  struct Case {
    const char* name;
    std::vector<std::string> sql;
  };
  // The run checkpoint's header: magic "TRCK", then its layout version (u32, host order).
  const std::vector<Case> cases = {
      {"checkpoint of a newer layout",
       {"UPDATE run_checkpoint SET data = substr(data, 1, 4) || x'63000000' || substr(data, 9)"}},
      {"truncated checkpoint", {"UPDATE run_checkpoint SET data = substr(data, 1, 30)"}},
      {"damaged log chunk", {"UPDATE iteration_log SET data = substr(data, 1, 13)"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    TempDir dir;
    DaemonConfig cfg = StateFrom(dir, c.sql);
    const FixtureFacts before = Facts(cfg.StateDbPath());
    DaemonHarness h;
    REQUIRE(h.Start(cfg, ReplayParts(1)).ok());  // starts: never a crash loop
    auto show = h.Show(std::to_string(before.run_id));
    REQUIRE(show.ok());
    CHECK((*show)["run"]["state"] == "set_aside");
    CHECK(!(*show)["run"]["end_reason"].get<std::string>().empty());
    ControlRequest r;
    r.cmd = "status";
    auto status = h.Request(r);
    REQUIRE(status.ok());
    REQUIRE((*status)["runs_set_aside"].size() == 1);
    CHECK((*status)["runs_set_aside"][0]["id"] == before.run_id);
    const std::string metrics = HttpGet("127.0.0.1", h.metrics_port(), "/metrics").body;
    CHECK(metrics.find("seqpoint_runs_set_aside_total 1") != std::string::npos);
    // New runs are measured as usual.
    CHECK(WaitFor([&] { return h.Show("job-0").ok(); }));
  }
}
