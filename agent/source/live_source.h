// The live iteration source of this build: the eBPF probes (ebpf_source.cpp) when
// SEQPOINT_HAVE_EBPF, else a stub that says why there is none (no_ebpf_source.cpp). CMake picks
// the file, so no #ifdef is needed here.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>

#include "agent/config/config.h"
#include "agent/source/iteration_source.h"
#include "common/status.h"

namespace seqpoint::daemon {

// The live iteration source (eBPF probes), or Unsupported naming why not.
Result<std::unique_ptr<IterationSource>> MakeLiveSource(boost::asio::io_context& io,
                                                        const DaemonConfig& config);

// Removes the probes a daemon with this config (its probes.pin_dir and state directory) left
// pinned, detaching them: `seqpointd --unpin`, for a node where no daemon will come back.
// Returns the pin directory and how many pins were removed.
Result<std::pair<std::string, int>> RemoveProbePins(const DaemonConfig& config);

}  // namespace seqpoint::daemon
