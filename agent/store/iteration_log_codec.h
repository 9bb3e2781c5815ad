// The iteration log's bytes (store_log.cpp): each chunk of a run's log is one BLOB, and the
// chunk's `format` column says how to read it, so a reader never guesses from a size.
//
//  - format 0 (schema <= 5, seqpointd before the explicit codec): IterationLogEntry structs
//    memcpy'd in host layout, 40 bytes each, or 32 bytes each before iteration times were
//    logged. Read, never written; told apart by exact size only (entries * 40 or * 32); any
//    other size is an error, not a best guess.
//  - format 1: a 8-byte header ("SPIL", u32 codec version) and fixed-size entries, every field
//    little-endian at a fixed offset, whatever the compiler's padding or the host's byte order:
//     - version 1 (schema v6): 40 bytes (pid i32, seq_len u32, iter u64, batch u32, repeat u32,
//       tokens f64, time_ns f64); read as flags 0 (every iteration measurable, as then).
//     - version 2 (written now): the same and flags u32 (kIterationLogUnmeasurable: the
//       iteration came without a begin, and a replay must tell the selector so), 44 bytes.
//    A version above 2 (a newer seqpointd's) is Unsupported, never misread.
//
// A format this build does not know (a newer seqpointd's, after a downgrade) is Unsupported:
// the run is set aside (docs/failure-modes.md), never misread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/store/run_model.h"
#include "common/status.h"

namespace seqpoint::daemon {

inline constexpr int kIterationLogLegacyFormat = 0;
inline constexpr int kIterationLogFormat = 1;  // what this build writes

// The chunk image of `entries` in kIterationLogFormat.
std::string EncodeIterationLog(const std::vector<IterationLogEntry>& entries);

// Appends the `entries` entries of a chunk stored in `format` to *out. Errors name the chunk
// (`what`, e.g. "run 3 chunk 17") and why it cannot be read.
Status DecodeIterationLog(int format, std::string_view blob, int64_t entries,
                          const std::string& what, std::vector<IterationLogEntry>* out);

}  // namespace seqpoint::daemon
