// The selection's JSON form (docs/cli.md), written by `select` and read by
// `project`. Reading validates everything `project` relies on and names the file and the
// offending point in its errors.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "selector/selection.h"

namespace seqpoint::selector {

std::string SelectionToJson(const Selection& selection, int indent = -1);
Result<Selection> SelectionFromJson(std::string_view text, std::string_view source);

}  // namespace seqpoint::selector
