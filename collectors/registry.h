// The one explicit registry of collectors (docs/architecture.md, Conventions, node_exporter's collector table):
// name, enabled by default, factory. No static-initialiser registration: the table is a
// function-local constant in registry.cpp, the only file of the collectors that tests
// SEQPOINT_HAVE_* (a vendor path this build lacks still has an entry, whose collector opens as
// "not present: built without X", so `seqpoint status` tells a missing build option from a
// missing device). The energy sources have their own table, in order of preference.
//
// Threads: the tables are immutable; factories may be called from any thread.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "collectors/collector.h"
#include "collectors/collector_config.h"
#include "collectors/collector_set.h"
#include "collectors/energy/energy_collector.h"

namespace seqpoint::collectors {

using CollectorFactory = std::unique_ptr<Collector> (*)(const CollectorConfig&);

struct CollectorInfo {
  std::string_view name;  // "perf"; config keys are collectors.<name>.*
  bool enabled_by_default;
  std::string_view summary;  // one line for --help and docs
  CollectorFactory factory;
};

const std::vector<CollectorInfo>& CollectorRegistry();
const std::vector<EnergySourceInfo>& EnergySourceRegistry();

// collectors.<name>.enabled when set, else the registry default.
bool IsCollectorEnabled(const CollectorInfo& info, const CollectorConfig& config);

// A CollectorSet holding every enabled collector, in registry order (not yet opened).
CollectorSet MakeCollectorSet(const CollectorConfig& config);

}  // namespace seqpoint::collectors
