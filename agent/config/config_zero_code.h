// The zero-code probe keys of seqpointd's config (docs/usdt-abi.md: "configured by
// name"), kept apart from config.cpp's scalar key table because one of them is a table of
// tables:
//
//   [probes]
//   zero_code = ["miopen-rnn", "cudnn-rnn", "cudnn9-rnn"]  # presets enabled, by name
//   [probes.zero_code_custom.my-rnn]              # a probe of your own, enabled when defined
//   library = "libmyrnn.so"
//   function = "my_rnn_forward"
//   arg = 2
//   boundary_function = "my_optimizer_step"
//
// The custom fields are the ZeroCodeProbe fields (probes/zero_code_probe.h) under the
// names of `seqpoint probe --zero-code` specs, spelled out. Errors name the file, line and
// column, the key and the fix, and list the preset names. The TOML-facing half is in
// config_zero_code_toml.h (toml++ is private to this library). Plain functions; no state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"
#include "probes/zero_code_probe.h"
#include "common/status.h"

namespace seqpoint::daemon {

// probes.zero_code as a TOML literal.
std::string ZeroCodePresetNamesToml(const std::vector<std::string>& names);

// Documentation rows of the custom probe fields (keys "probes.zero_code_custom.<name>.FIELD"),
// printed after probes.zero_code_custom by --print-default-config.
std::vector<ConfigKeyDoc> ZeroCodeCustomKeyDocs();

// Cross-key checks (ValidateConfig): a custom probe may not take a preset's name, and at most
// SP_MAX_ZERO_CODE_PROBES probes in all.
Status ValidateZeroCodeConfig(const DaemonConfig& config);

// The probes to attach, in priority order: custom probes (by name), then the presets in the
// order listed. A process gets the first one whose libraries it maps (one source of
// iterations per process), and none when it carries the seqpoint USDT provider.
Result<std::vector<probes::ZeroCodeProbe>> ResolveZeroCodeProbes(const DaemonConfig& config);

}  // namespace seqpoint::daemon
