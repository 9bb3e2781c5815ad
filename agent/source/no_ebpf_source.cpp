// The live source of a build without eBPF (SEQPOINT_HAVE_EBPF=0).
#include "agent/source/live_source.h"

namespace seqpoint::daemon {

Result<std::unique_ptr<IterationSource>> MakeLiveSource(boost::asio::io_context&,
                                                        const DaemonConfig&) {
  return Unsupported(
      "this seqpointd was built without eBPF (SEQPOINT_WITH_EBPF=OFF), so it "
      "cannot find training processes; rebuild with libbpf-dev, bpftool and "
      "clang installed, or use --replay TRACE");
}

Result<std::pair<std::string, int>> RemoveProbePins(const DaemonConfig&) {
  return std::make_pair(std::string(), 0);  // nothing can have been pinned
}

}  // namespace seqpoint::daemon
