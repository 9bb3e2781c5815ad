#include "agent/source/iteration_source.h"

#include <string.h>  // sigabbrev_np

namespace seqpoint::daemon {

std::string ProcessExit::Describe() const {
  std::string how = "exited";
  if (signal && *signal != 0) {
    const char* abbrev = sigabbrev_np(*signal);  // "KILL"; null for real-time signals
    std::string detail = abbrev ? std::string("SIG") + abbrev : "";
    if (core_dumped) detail += detail.empty() ? "core dumped" : ", core dumped";
    how =
        "killed by signal " + std::to_string(*signal) + (detail.empty() ? "" : " (" + detail + ")");
  } else if (exit_code) {
    how = "exited with status " + std::to_string(*exit_code);
  }
  return mid_iteration ? how + " in the middle of an iteration" : how;
}

}  // namespace seqpoint::daemon
