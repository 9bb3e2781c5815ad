// Just enough ELF reading for discovery and clear attach errors: which USDT probes a binary
// carries (.note.stapsdt) and whether it defines a function symbol (.symtab or .dynsym).
//
// Input is untrusted (any file a process maps): every offset and size is bounds-checked against
// the file, and anything that is not a 64-bit little-endian ELF file is a clear error, never a
// crash. The file is mapped read-only for the duration of one call. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace seqpoint::probes {

struct UsdtNote {
  std::string provider;
  std::string name;
};

// The USDT probes listed in `path`'s .note.stapsdt section (empty when it has none).
Result<std::vector<UsdtNote>> ReadUsdtNotes(const std::string& path);

// Whether `path` carries both seqpoint:iteration_begin and seqpoint:iteration_end.
Result<bool> HasSeqpointProvider(const std::string& path);

// Whether `path` defines function `name` in its static or dynamic symbol table.
Result<bool> HasFunctionSymbol(const std::string& path, const std::string& name);

}  // namespace seqpoint::probes
