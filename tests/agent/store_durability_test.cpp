// The state database's promises, on the seqpointd binary (docs/config.md "Durability",
// docs/bounds.md): what a SIGKILL may lose (the durability window, measured), that what was
// shown is never lost, and that a store which cannot be written costs no run and is reported
// instead of flooding the log.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>

#include "agent/store/store.h"
#include "agent/testing/seqpointd_process.h"
#include "agent/testing/test_harness.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

// 64 rows per step every 100 ms: about 640 iterations a second, 1500 in all.
std::vector<std::string> SlowReplay(const std::string& key) {
  return {"--replay", RecordedTrace() + "@" + key, "--replay-delay-us", "100000"};
}

uint64_t StoredIterations(const std::string& state_db, const std::string& key) {
  auto store = Store::Open(state_db);
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  auto id = (*store)->FindRun(key);
  REQUIRE(id.ok());
  if (!id->has_value()) return 0;
  return (*store)->LoadRun(**id)->run.iterations;
}

// seqpoint_run_iterations_total of the run, from /metrics (which saves nothing).
uint64_t MetricIterations(Seqpointd& d) {
  std::smatch m;
  std::string text = d.Metrics();
  static const std::regex re("seqpoint_run_iterations_total\\{[^}]*\\} ([0-9.e+]+)");
  return std::regex_search(text, m, re) ? static_cast<uint64_t>(std::stod(m[1])) : 0;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// chattr +i on a file for the scope (root, ext4/xfs/tmpfs): SQLite may read it, not write it.
class Immutable {
 public:
  explicit Immutable(std::string path) : path_(std::move(path)) {
    ok_ = std::system(("chattr +i '" + path_ + "' 2>/dev/null").c_str()) == 0;
  }
  ~Immutable() { Release(); }
  void Release() {
    if (ok_) (void)std::system(("chattr -i '" + path_ + "'").c_str());
    ok_ = false;
  }
  bool ok() const { return ok_; }

 private:
  std::string path_;
  bool ok_ = false;
};

}  // namespace

TEST_CASE("agent durability: what show said is there after a SIGKILL, and the window is measured") {
  TempDir dir;
  const std::string db = dir.File("state/state.db");
  uint64_t shown = 0;
  {
    Seqpointd d(dir, SlowReplay("shown"), "shown.log");
    REQUIRE(d.Ready());
    REQUIRE(WaitFor([&] {
      json s = d.Show("shown");
      shown = s.is_object() ? s["run"]["iterations"].get<uint64_t>() : 0;
      return shown >= 300;
    }));
    d.Signal(SIGKILL);  // at once: no flush interval passes
    CHECK(d.Wait() == 128 + SIGKILL);
  }
  CHECK(StoredIterations(db, "shown") >= shown);

  // Killed at a moment nobody asked: at most the last flush interval (1 s) is lost.
  TempDir dir2;
  uint64_t accepted = 0;
  double rate = 0;
  {
    Seqpointd d(dir2, SlowReplay("window"), "window.log");
    REQUIRE(d.Ready());
    auto t0 = std::chrono::steady_clock::now();
    REQUIRE(WaitFor([&] { return MetricIterations(d) >= 64; }));
    uint64_t first = MetricIterations(d);
    REQUIRE(WaitFor([&] { return (accepted = MetricIterations(d)) >= 700; }));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rate = static_cast<double>(accepted - first) / secs;
    d.Signal(SIGKILL);
    CHECK(d.Wait() == 128 + SIGKILL);
  }
  const uint64_t stored = StoredIterations(dir2.File("state/state.db"), "window");
  const double lost_s = static_cast<double>(accepted - std::min(accepted, stored)) / rate;
  MESSAGE("durability window: " << accepted << " iterations accepted, " << stored
                                << " stored after SIGKILL: "
                                << accepted - std::min(accepted, stored) << " lost = " << lost_s
                                << " s at " << rate << " iterations/s");
  CHECK(stored > 0);
  CHECK(lost_s < 1.0 + 0.5);  // the flush interval, and a step of slack for a loaded machine
}

TEST_CASE("agent durability: a state.db that cannot be written keeps the runs, says so once") {
  TempDir dir;
  const std::string db = dir.File("state/state.db");
  {
    Seqpointd first(dir, {}, "first.log");  // creates the database
    REQUIRE(first.Ready());
    first.Signal(SIGTERM);
    REQUIRE(first.Wait() == 0);
  }
  Immutable immutable(db);
  if (!immutable.ok()) {
    MESSAGE("chattr +i not available here (needs root and a filesystem with attributes): skipped");
    return;
  }
  Seqpointd d(dir, {"--replay", RecordedTrace() + "@ro", "--replay-rows", "300"}, "ro.log");
  REQUIRE(d.Ready());
  json status = d.Request("status");
  REQUIRE(status.is_object());
  CHECK(status["store"]["writable"] == false);
  CHECK(d.Metrics().find("seqpoint_store_writable 0") != std::string::npos);
  // The run goes on in memory and closes there, waiting for the store.
  REQUIRE(WaitFor([&] { return d.Request("status")["runs_closed"] == 1; }));
  CHECK(d.Request("status")["store"]["unsaved_runs"] == 1);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // three more flushes fail
  const std::string log = d.Log();
  CHECK(Count(log, "cannot be written") == 1);
  CHECK(Count(log, "readonly") <= 1);  // not once per failed write
  immutable.Release();
  REQUIRE(WaitFor([&] { return d.Request("status")["store"]["writable"] == true; }));
  REQUIRE(WaitFor([&] { return d.Request("status")["store"]["unsaved_runs"] == 0; }));
  CHECK(d.Log().find("can be written again") != std::string::npos);
  CHECK(d.Metrics().find("seqpoint_store_writable 1") != std::string::npos);
  d.Signal(SIGTERM);
  CHECK(d.Wait() == 0);
  CHECK(StoredIterations(db, "ro") == 300);
}
