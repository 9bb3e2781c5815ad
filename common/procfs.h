// The readers of procfs (proc(5)) files, under an injectable procfs root: /proc/<pid>/stat
// (the command name, field 2, may hold spaces and parentheses, so fields are counted after its
// last ')') and the small whole files (environ, cgroup, maps) read with a bound.
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

// <proc_root>/<pid>
std::string ProcPidDir(const std::string& proc_root, pid_t pid);

// Up to `limit` bytes of a file (procfs files have no size: read until EOF or the limit);
// "" when it cannot be opened (the process is gone, or not ours to read).
std::string ReadBoundedFile(const std::string& path, size_t limit);

}  // namespace seqpoint
