// Small bridges between libbpf and the project's conventions: libbpf's log lines are captured
// (not printed) and quoted in the Status of the failing call; errno values become Status codes
// whose messages say what to fix; bpf_link and ring_buffer get RAII owners.
//
// Threads: libbpf's print hook is process-global; the capture buffer is thread-local, so each
// thread sees the libbpf lines of its own calls. SEQPOINT_LIBBPF_DEBUG=1 also prints every
// libbpf line (debug level included) to stderr.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

struct bpf_link;
struct ring_buffer;

namespace seqpoint::probes {

struct LinkDeleter {
  void operator()(bpf_link* link) const;
};
using LinkPtr = std::unique_ptr<bpf_link, LinkDeleter>;

struct RingBufferDeleter {
  void operator()(ring_buffer* rb) const;
};
using RingBufferPtr = std::unique_ptr<ring_buffer, RingBufferDeleter>;

// Installs the capturing print hook once per process. Idempotent, cheap.
void InstallLibbpfLogCapture();

// Clears this thread's captured libbpf lines (call before the libbpf call you will report on).
void ClearLibbpfLog();

// The libbpf warning lines captured on this thread since the last ClearLibbpfLog(), joined.
std::string TakeLibbpfLog();

// OK when this process may load and attach tracing BPF programs: CAP_SYS_ADMIN, or CAP_BPF
// with CAP_PERFMON (Linux 5.8+). Checked first, because without them the kernel's answers to
// feature probes are "not supported", which would mislead.
Status CheckBpfCapabilities();

// A Status for a failed libbpf call: `what` names the action and its input; `err` is the
// negative or positive errno; the captured libbpf lines are appended.
Status LibbpfError(std::string_view what, int err);

}  // namespace seqpoint::probes
