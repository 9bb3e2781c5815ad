// `seqpoint probe`: placeholder until its folder's library lands.
#include <cstdio>

#include "agent/cli/commands.h"

namespace seqpoint::cli {

int RunProbeCommand(Args) {
  std::fprintf(stderr, "seqpoint probe: not built into this version\n");
  return 1;
}

}  // namespace seqpoint::cli
