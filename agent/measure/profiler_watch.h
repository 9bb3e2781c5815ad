// Profiler detection (issue 12, item 4): when a user profiles a training process themselves, the
// agent gets out of the way. A process is being profiled when
//  - it maps a profiler's library: CUPTI (libcupti), the Nsight perf SDK (libnvperf_host,
//    libnvperf_target), rocprofiler (librocprofiler64) or rocprofiler-sdk; or
//  - it or one of its ancestors runs a profiler's launcher: nsys, ncu, rocprof, rocprofv3,
//    omniperf (the process's comm or the basename of its exe: a symlink named nsys counts).
// Both lists are runs.profiler_libraries and runs.profiler_commands. PyTorch's CUDA build maps
// libcupti in every process (kineto links it into libtorch_cuda), so CUPTI mapped beside
// libtorch_cuda is no sighting: there the launchers and the vendor libraries' busy answers tell.
// librocprofiler-register is never a sighting: every HIP 6.2+ process maps it to register tools
// that may never come.
//
// Read through an injectable procfs root (daemon.proc_root), so tests can use fixture trees;
// the live tests use real processes mapping mimic libraries under the profilers' file names.
// Threads: plain functions, no state.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace seqpoint::daemon {

struct ProfilerPatterns {
  // A mapped file whose basename starts with one of these (or with "lib" + one of these).
  std::vector<std::string> libraries = {"libcupti", "libnvperf", "librocprofiler",
                                        "rocprofiler-sdk"};
  // A process in the ancestry (itself included) whose comm or exe basename is one of these.
  std::vector<std::string> commands = {"nsys", "ncu", "rocprof", "rocprofv3", "omniperf"};
};

struct ProfilerSighting {
  // The pattern that matched, a bounded label value ("libcupti", "nsys", ...).
  std::string profiler;
  // What was seen, for logs, status and show: "maps /usr/lib/x/libcupti.so.12",
  // "ancestor pid 812 runs nsys".
  std::string evidence;
};

// The first sighting on `pid`, or none. Never fails: an unreadable maps file (the process is
// gone, or another user's without CAP_SYS_PTRACE) is no sighting.
std::optional<ProfilerSighting> FindProfiler(const std::string& proc_root, pid_t pid,
                                             const ProfilerPatterns& patterns);

// The library pattern a mapped file's basename matches, or "" (exposed for the tests).
std::string MatchProfilerLibrary(const std::string& basename, const ProfilerPatterns& patterns);

}  // namespace seqpoint::daemon
