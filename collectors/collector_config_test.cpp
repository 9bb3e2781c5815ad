#include "collectors/collector_config.h"

#include <doctest/doctest.h>

namespace seqpoint::collectors {

TEST_CASE("collector config: every key is documented and settable with its own default") {
  auto keys = CollectorConfigKeys();
  CHECK(keys.size() >= 15);
  for (const CollectorKeyDoc& k : keys) {
    CHECK(k.key.substr(0, 11) == "collectors.");
    CHECK(!k.doc.empty());
    CHECK(!k.default_value.empty());
  }
  CollectorConfig c;
  REQUIRE(SetCollectorOption(&c, "collectors.perf.events",
                             std::vector<std::string>{"task-clock", "cycles"})
              .ok());
  CHECK(c.perf.events.size() == 2);
  REQUIRE(SetCollectorOption(&c, "collectors.nvml.library", std::string("/opt/libnvml.so")).ok());
  CHECK(c.nvml.library == "/opt/libnvml.so");
  REQUIRE(SetCollectorOption(&c, "collectors.papi.enabled", true).ok());
  CHECK(c.papi.enabled == true);
  REQUIRE(SetCollectorOption(&c, "collectors.perf.max_events_per_group", int64_t{4}).ok());
  CHECK(c.perf.max_events_per_group == 4);
}

TEST_CASE("collector config: unknown keys and wrong types name the key and the fix") {
  CollectorConfig c;
  Status s = SetCollectorOption(&c, "collectors.perf.evnts", std::vector<std::string>{});
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("collectors.perf.evnts") != std::string::npos);
  s = SetCollectorOption(&c, "collectors.perf.enabled", std::string("yes"));
  CHECK(s.message() == "config key collectors.perf.enabled: expected a boolean");
  s = SetCollectorOption(&c, "collectors.energy.sources", std::vector<std::string>{"dcgm"});
  CHECK(s.message().find("unknown energy source 'dcgm'") != std::string::npos);
  s = SetCollectorOption(&c, "collectors.perf.max_events_per_group", int64_t{-1});
  CHECK(!s.ok());
}

}  // namespace seqpoint::collectors
