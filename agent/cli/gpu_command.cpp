// `seqpoint gpu`: placeholder until its folder's library lands.
#include <cstdio>

#include "agent/cli/commands.h"

namespace seqpoint::cli {

int RunGpuCommand(Args) {
  std::fprintf(stderr, "seqpoint gpu: not built into this version\n");
  return 1;
}

}  // namespace seqpoint::cli
