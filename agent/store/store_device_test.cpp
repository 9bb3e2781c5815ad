// Each measured value names the device it was read on (schema 9): stored, read back, summarised
// per device; a schema-8 file migrates in place, its older rows read as "not recorded", never as
// a process's own value or a guessed device.
#include <doctest/doctest.h>

#include "agent/store/measured_devices.h"
#include "agent/store/store.h"
#include "agent/testing/test_util.h"

using namespace seqpoint::daemon;

namespace {

// The UUIDs of two GPUs of the recorded node (collectors/gpu/testdata/node5.nvidia-smi.xml).
constexpr const char* kT4 = "GPU-d37e67a5-91dd-3774-a5cb-99096249601a";
constexpr const char* kRtx3080 = "GPU-19d6d965-2acc-f646-00f8-4c76979aabb4";

RunSnapshot Snap(int64_t id) {
  RunSnapshot s;
  s.run.id = id;
  s.run.key = "job-gpu";
  s.run.iterations = 10;
  return s;
}

}  // namespace

TEST_CASE("agent store: measurements keep their device, a run on two GPUs names both") {
  testing::TempDir dir;
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  RunRecord r;
  r.key = "job-gpu";
  const int64_t id = *(*store)->CreateRun(r);
  std::vector<Measurement> m = {{3, 100, 3, 12, 1, "time_ns", "ns", 1.1e8},
                                {3, 100, 3, 12, 1, "nvml:gpu0:power", "W", 70.1, kT4},
                                {3, 100, 3, 12, 1, "nvml:gpu0:sm_clock", "MHz", 1590, kT4},
                                {4, 101, 3, 12, 1, "nvml:gpu1:power", "W", 220, kRtx3080},
                                {5, 100, 4, 40, 1, "nvml:gpu0:power", "W", 69.5, kT4},
                                {5, 100, 4, 40, 1, "energy_uj", "uJ", 5e6, "node"}};
  REQUIRE((*store)->SaveRun(Snap(id), m, {}).ok());
  auto back = (*store)->LoadMeasurements(id);
  REQUIRE(back.ok());
  REQUIRE(back->size() == m.size());
  for (const Measurement& x : *back) {
    CHECK(x.device_recorded);
    if (x.metric.rfind("nvml:gpu0:", 0) == 0) CHECK(x.device == kT4);
    if (x.metric.rfind("nvml:gpu1:", 0) == 0) CHECK(x.device == kRtx3080);
    if (x.metric == "time_ns") CHECK(x.device.empty());
  }
  const MeasuredDevices d = SummariseDevices(*back);
  CHECK(d.unrecorded == 0);
  REQUIRE(d.devices.size() == 3);  // by id: the two GPUs, then "node"
  CHECK(d.devices[0].device == kRtx3080);
  CHECK(d.devices[0].iterations == 1);
  CHECK(d.devices[1].device == kT4);
  CHECK(d.devices[1].collectors == std::vector<std::string>{"nvml"});
  CHECK(d.devices[1].iterations == 2);
  CHECK(d.devices[1].values == 3);
  CHECK(d.devices[2].device == "node");
  CHECK(d.devices[2].collectors == std::vector<std::string>{"energy_uj"});
}

TEST_CASE("agent store: a schema-8 file gains the device column, its old rows are 'not recorded'") {
  testing::TempDir dir;
  int64_t id = 0;
  {
    auto store = Store::Open(dir.File("state.db"));
    REQUIRE(store.ok());
    RunRecord r;
    r.key = "old-gpu";
    id = *(*store)->CreateRun(r);
    SqliteDb& db = (*store)->db();
    // The file as a schema-8 seqpointd left it, with a row it wrote its own way (no column list).
    for (const std::string& sql :
         {std::string("ALTER TABLE measurements DROP COLUMN device"),
          std::string("INSERT OR REPLACE INTO meta VALUES('oldest_compatible_schema', 8)"),
          std::string("PRAGMA user_version = 8"),
          "INSERT OR REPLACE INTO measurements VALUES(" + std::to_string(id) +
              ", 1, 100, 1, 12, 1, 'nvml:gpu0:power', 'W', 70.5)"}) {
      REQUIRE_MESSAGE(db.Exec(sql).ok(), sql);
    }
  }
  auto store = Store::Open(dir.File("state.db"));
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  CHECK(!(*store)->recovery().has_value());  // migrated in place, not moved aside
  auto version = (*store)->GetCounter("oldest_compatible_schema");
  REQUIRE(version.ok());
  CHECK(*version == kStoreOldestCompatibleSchema);
  CHECK(kStoreOldestCompatibleSchema == 9);
  auto old = (*store)->LoadMeasurements(id);
  REQUIRE(old.ok());
  REQUIRE(old->size() == 1);
  CHECK_FALSE((*old)[0].device_recorded);
  CHECK((*old)[0].device.empty());
  CHECK((*old)[0].value == 70.5);
  // Rows this build writes name their device beside the old one.
  REQUIRE((*store)
              ->SaveRun(Snap(id), {{2, 100, 2, 12, 1, "nvml:gpu0:power", "W", 71.0, kT4}}, {})
              .ok());
  auto both = (*store)->LoadMeasurements(id);
  REQUIRE(both.ok());
  REQUIRE(both->size() == 2);
  CHECK((*both)[1].device == kT4);
  const MeasuredDevices d = SummariseDevices(*both);
  CHECK(d.unrecorded == 1);
  REQUIRE(d.devices.size() == 1);
  CHECK(d.devices[0].device == kT4);
}
