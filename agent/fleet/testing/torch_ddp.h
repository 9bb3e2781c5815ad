// Test helper: whether this machine can run bench/fleet/ddp_straggler_job.py, a real PyTorch DDP
// job over gloo on the CPU (Debian's python3-torch for /usr/bin/python3). The one check of the
// tests that run it (straggler_ddp_test.cpp, and through live_ddp_job.h the daemon's e2e tests);
// each adds what else it needs (eBPF, the built daemon). Prints why when not.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>

namespace seqpoint::daemon::fleet::testing {

inline bool HasTorchDistributed() {
  if (std::system("/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null") == 0) return true;
  MESSAGE("skipped: python3-torch (torch.distributed) is not installed");
  return false;
}

}  // namespace seqpoint::daemon::fleet::testing
