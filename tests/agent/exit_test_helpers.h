// Helpers shared by the tests of processes whose exits the daemon sees late or never
// (ddp_e2e_test.cpp, lost_exit_e2e_test.cpp): ranks of the USDT stand-in trainer held at their
// ends, a daemon that reads its rings only when woken, and records queued in discovery's ring
// that wake nobody (a library load by this process, seen by the dynamic linker's hook).
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "agent/testing/seqpointd_process.h"

namespace seqpoint::daemon::testing {

// A rank: usdt_workload with `args` (e.g. "--wait --hold --iters 60"), its stdout in `out`
// (where it prints "done"), through a shell that execs it (the pid stays the workload's).
inline std::vector<std::string> HeldRank(const std::string& args, const std::string& out) {
  return {"/bin/sh", "-c", "exec '" + UsdtWorkload() + "' " + args + " > '" + out + "'"};
}

// Whether `pid` is the workload yet (the shell has exec'd it).
inline bool IsWorkload(pid_t pid) {
  return ReadFile("/proc/" + std::to_string(pid) + "/comm") == "usdt_workload\n";
}

// A daemon config for run `key` only, whose iteration ring is read once a minute and discovery
// every 10 minutes unless woken: what it learns comes from wake-ups, its exit paths and its
// idle check. `runs` adds lines to [runs].
inline std::string SleepyDaemonConfig(const TempDir& dir, const std::string& key,
                                      const std::string& runs = "") {
  return dir.Write("seqpointd.toml", "[runs]\nonly_key = \"" + key + "\"\n" + runs +
                                         "[probes]\npoll_interval_ms = 60000\n"
                                         "discover_interval_ms = 600000\n");
}

// Waits until `key` is a data-parallel run of `ranks` ranks.
inline bool RanksJoined(Seqpointd& d, const std::string& key, size_t ranks) {
  return WaitFor([&] {
    nlohmann::json s = d.Show(key);
    return s.is_object() && s.contains("ranks") && s["ranks"]["ranks"].size() == ranks;
  });
}

// A library this process has not loaded, loaded and unloaded once (each a record of the
// dynamic linker's hook in discovery's ring, which wakes nobody); "" when none is found here.
inline std::string UnloadedLibrary() {
  for (const char* name : {"libresolv.so.2", "libanl.so.1", "libutil.so.1", "libbz2.so.1.0",
                           "libz.so.1", "libcrypt.so.1"}) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {  // loaded already: no change
      dlclose(h);
      continue;
    }
    if (void* h = dlopen(name, RTLD_NOW)) {
      dlclose(h);
      return name;
    }
  }
  return "";
}

// The sum of a family's samples in a /metrics text.
inline double SumOf(const std::string& text, const std::string& family) {
  double sum = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(family, 0) != 0) continue;
    const char next = line.size() > family.size() ? line[family.size()] : ' ';
    if (next != '{' && next != ' ') continue;
    sum += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return sum;
}

}  // namespace seqpoint::daemon::testing
