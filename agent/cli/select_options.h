// The selection options shared by `select` and `evaluate`, and their defaults.
#pragma once

#include <vector>

#include "agent/cli/cli_args.h"
#include "agent/cli/selection_runner.h"

namespace seqpoint::cli {

// Option specs: --budget, --budget-fraction, --target-error, --online, --repeats, --warmup,
// --counter-groups, --max-bins. `fraction_offline`: the command turns --budget-fraction into a
// count offline (evaluate, which knows the run's length); otherwise it needs --online (select).
std::vector<OptionSpec> SelectOptionSpecs(bool fraction_offline);

// Fills a request from parsed options. `iterations` (0 if unknown) turns --budget-fraction into
// a count for offline selection.
Result<SelectRequest> SelectRequestFromArgs(const ParsedArgs& args, const std::string& trace,
                                            uint64_t iterations);

}  // namespace seqpoint::cli
