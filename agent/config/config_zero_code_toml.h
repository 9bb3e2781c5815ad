// The TOML-facing half of config_zero_code.h, for config.cpp only: toml++ is built as a shared
// library whose compile definitions only seqpoint_daemon's own sources get.
#pragma once

#include <toml++/toml.h>

#include <string_view>
#include <vector>

#include "probes/zero_code_probe.h"
#include "common/status.h"

namespace seqpoint::daemon {

// probes.zero_code: an array of preset names, each known, none twice. The message is the part
// after "key 'probes.zero_code' " (config.cpp adds the location and the key).
Status SetZeroCodePresetNames(const toml::node& value, std::vector<std::string>* out);

// probes.zero_code_custom: a table of probe tables. Errors carry their own location
// ("<source>:<line>:<column>: ..."), that of the offending field.
Status ParseZeroCodeCustom(const toml::node& value, std::string_view source,
                           std::vector<probes::ZeroCodeProbe>* out);

}  // namespace seqpoint::daemon
