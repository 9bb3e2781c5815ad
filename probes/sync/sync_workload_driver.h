// Driving probes/sync_workload (sync_workload.c) from a test: the CUDA runtime it loads and its
// line protocol. Shared by the sync probes' tests and the eBPF source's
// (agent/source/ebpf_source_sync_test.cpp), so both find the toolkit and skip the same way.
#pragma once

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "probes/testing/child_process.h"

namespace seqpoint::probes::testing {

// The CUDA toolkit's libcudart.so.13 ($SEQPOINT_CUDA_LIB_DIR, else /usr/local/cuda/lib64): no
// GPU needed, each call is entered and returns an error at once. Without it: "" after a SKIP
// line that says what is absent and how to point at it.
inline std::string CudaRuntimeOrSkip() {
  const char* dir = std::getenv("SEQPOINT_CUDA_LIB_DIR");
  const std::string path =
      std::string(dir && *dir ? dir : "/usr/local/cuda/lib64") + "/libcudart.so.13";
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) return path;
  std::fprintf(stderr,
               "SKIP: %s is absent (no CUDA 13 toolkit here; set SEQPOINT_CUDA_LIB_DIR to its "
               "lib64)\n",
               path.c_str());
  return "";
}

// The child's next line; the test fails with the reason when there is none.
inline std::string RequireLine(ChildProcess& child) {
  auto line = child.ReadLine();
  REQUIRE_MESSAGE(line.ok(), line.status().ToString());
  return *line;
}

}  // namespace seqpoint::probes::testing
