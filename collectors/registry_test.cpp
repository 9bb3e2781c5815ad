// The registry table and CollectorSet: one failing collector (error, exception, absent) never
// stops the others, health and cost are counted per collector, counter groups rotate by visit.
#include "collectors/registry.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <stdexcept>

#include "collectors/collectors_test_util.h"

namespace seqpoint::collectors {
namespace {

// A collector whose behaviour each test case sets.
class ScriptedCollector : public Collector {
 public:
  enum class Fail { kNone, kOpen, kOpenAbsent, kEnd, kThrow };
  ScriptedCollector(std::string name, Fail fail, size_t groups = 1)
      : name_(std::move(name)), fail_(fail), groups_(groups) {}
  std::string_view name() const override { return name_; }
  Status Open(const Target&) override {
    if (fail_ == Fail::kOpen) return IoError("scripted open failure");
    if (fail_ == Fail::kOpenAbsent) return NotFound("no such device here");
    return Status::Ok();
  }
  Status Begin() override { return Status::Ok(); }
  Result<std::vector<Sample>> End() override {
    if (fail_ == Fail::kEnd) return Unavailable("scripted EAGAIN");
    if (fail_ == Fail::kThrow) throw std::runtime_error("scripted exception");
    return std::vector<Sample>{{name_ + ":group", static_cast<double>(group_), "count"}};
  }
  void Close() override {}
  size_t group_count() const override { return groups_; }
  Status SelectGroup(size_t g) override {
    group_ = g;
    return Status::Ok();
  }
  size_t current_group() const override { return group_; }

 private:
  std::string name_;
  Fail fail_;
  size_t groups_;
  size_t group_ = 0;
};

}  // namespace

TEST_CASE("registry: an explicit table, defaults, every entry constructs") {
  const auto& reg = CollectorRegistry();
  std::vector<std::string> names;
  for (const CollectorInfo& i : reg) names.emplace_back(i.name);
  CHECK(names == std::vector<std::string>{"perf", "papi", "rocm_smi", "nvml", "rapl", "energy"});
  CollectorConfig c;
  for (const CollectorInfo& i : reg) {
    auto coll = i.factory(c);
    REQUIRE(coll != nullptr);
    CHECK(coll->name() == i.name);
  }
  CHECK(IsCollectorEnabled(reg[0], c));
  CHECK(!IsCollectorEnabled(reg[1], c));  // papi needs events
  c.papi.enabled = true;
  c.perf.enabled = false;
  CHECK(IsCollectorEnabled(reg[1], c));
  CHECK(!IsCollectorEnabled(reg[0], c));
  CHECK(EnergySourceRegistry().size() == 4);
  CHECK(EnergySourceRegistry()[0].name == "gpu_metrics");
}

TEST_CASE("collector set: one failing collector never stops the others") {
  CollectorSet set;
  using F = ScriptedCollector::Fail;
  set.Add(std::make_unique<ScriptedCollector>("bad_open", F::kOpen));
  set.Add(std::make_unique<ScriptedCollector>("absent", F::kOpenAbsent));
  set.Add(std::make_unique<ScriptedCollector>("eagain", F::kEnd));
  set.Add(std::make_unique<ScriptedCollector>("thrower", F::kThrow));
  set.Add(std::make_unique<ScriptedCollector>("good", F::kNone));
  set.Open({getpid(), ""});
  CHECK(set.open_count() == 3);
  for (int i = 0; i < 3; ++i) {
    set.Begin(i);
    auto readings = set.End();
    REQUIRE(readings.size() == 3);
    CHECK(readings[0].collector == "eagain");
    CHECK(readings[0].status.code() == ErrorCode::kUnavailable);
    CHECK(readings[1].status.code() == ErrorCode::kInternal);
    CHECK(readings[1].status.message() == "collector thrower threw from End: scripted exception");
    CHECK(readings[2].status.ok());
    CHECK(readings[2].samples.size() == 1);
  }
  const auto& st = set.stats();
  CHECK(st[0].state == CollectorState::kFailed);
  CHECK(st[0].open_status.message() == "scripted open failure");
  CHECK(st[1].state == CollectorState::kAbsent);
  CHECK(st[2].measurements_failed == 3);
  CHECK(st[3].measurements_failed == 3);
  CHECK(st[4].measurements_ok == 3);
  CHECK(st[4].measurements_failed == 0);
  CHECK(st[4].total_cost_us >= st[4].last_cost_us);
  CHECK(CollectorStateName(st[1].state) == "absent");
  set.Close();
  CHECK(set.stats()[4].state == CollectorState::kClosed);
  CHECK(set.stats()[1].state == CollectorState::kAbsent);  // kept for status
}

TEST_CASE("collector set: visit k measures group k mod G and says which") {
  CollectorSet set;
  set.Add(std::make_unique<ScriptedCollector>("grouped", ScriptedCollector::Fail::kNone, 3));
  set.Open({0, ""});
  for (uint64_t visit = 0; visit < 7; ++visit) {
    set.Begin(visit);
    auto r = set.End();
    REQUIRE(r.size() == 1);
    CHECK(r[0].group == visit % 3);
    CHECK(r[0].group_count == 3);
    CHECK(r[0].samples[0].value == visit % 3);
  }
}

TEST_CASE("registry: the default set on this node measures a real process") {
  if (geteuid() != 0) {
    MESSAGE("skipped: perf on another process needs root (CI runs as root)");
    return;
  }
  testing::BusyChild child;
  REQUIRE(child.ok());
  CollectorConfig c;
  c.nvml.library = "/nonexistent/libnvidia-ml.so.1";  // deterministic: NVML absent
  CollectorSet set = MakeCollectorSet(c);
  set.Open({child.pid(), ""});
  for (const CollectorStats& st : set.stats()) {
    MESSAGE(st.name << ": " << CollectorStateName(st.state) << " "
                    << (st.state == CollectorState::kOpen ? st.description
                                                          : st.open_status.ToString()));
  }
  REQUIRE(set.stats()[0].name == "perf");
  CHECK(set.stats()[0].state == CollectorState::kOpen);
  for (const CollectorStats& st : set.stats()) {
    CHECK(st.state != CollectorState::kFailed);  // absent is fine, failed is not
  }
  set.Begin(0);
  child.BurnMain(10);
  auto readings = set.End();
  REQUIRE(!readings.empty());
  CHECK(readings[0].collector == "perf");
  CHECK(readings[0].status.ok());
}

}  // namespace seqpoint::collectors
