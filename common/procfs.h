// The one reader of /proc/<pid>/stat (proc(5)), under an injectable procfs root. The command
// name (field 2) may hold spaces and parentheses, so fields are counted after its last ')'.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/status.h"

namespace seqpoint {

struct ProcStat {
  char state = '?';         // field 3
  pid_t ppid = 0;           // field 4
  uint64_t utime = 0;       // field 14, clock ticks
  uint64_t stime = 0;       // field 15, clock ticks
  uint64_t start_time = 0;  // field 22, clock ticks since boot
};

// `pid` is a number or "self". Errors name the file (common/file_error.h).
Result<ProcStat> ReadProcStat(const std::string& proc_root, const std::string& pid);

}  // namespace seqpoint
