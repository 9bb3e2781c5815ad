// Every check of a parsed config in one place: config/'s own (ValidateConfig) and those owned by
// the subsystems above it (the upload's TLS and credential files), so that --check-config, the
// start and a reload accept exactly the same files. config/ depends on none of those subsystems.
#pragma once

#include <string>

#include "agent/config/config.h"
#include "common/status.h"

namespace seqpoint::daemon {

Status CheckConfig(const DaemonConfig& config);

// LoadConfig, then the subsystems' checks; errors name the file as LoadConfig's do.
Result<DaemonConfig> LoadCheckedConfig(const std::string& path, bool missing_ok);

}  // namespace seqpoint::daemon
