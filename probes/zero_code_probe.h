// Zero-code probes: an iteration's SL read from an argument of a library function the job
// already calls (no change to the training code), the iteration boundary from another function.
//
//   SL function       called one or more times per iteration; argument `arg_index` carries the SL
//                     (or the token dimension of a GEMM); several calls are reduced
//                     (first/max/last)
//   boundary function called once at the end of every iteration (an optimizer step), or in one
//                     burst there (one all-reduce per gradient bucket): a boundary with no SL call
//                     since the previous one only moves the next iteration's start
//   gate function     optional. Libraries whose compute call carries no SL put it in a descriptor
//                     set beforehand (cuDNN 9: cudnnSetRNNDataDescriptor(desc, type, layout,
//                     maxSeqLength, ...) then cudnnRNNForward(handle, rnn, fwdMode, ..., xDesc,
//                     ...)). With a gate, an SL-function call only records the calling thread's
//                     latest SL; a gate call whose argument `gate_arg` equals `gate_value` is the
//                     iteration's SL call, with that recorded SL (so backward-pass and inference
//                     descriptor sets, and inference forwards, count for nothing)
//
// Presets cover the common libraries (ZeroCodePresets()); users add their own with a spec string
// (ParseZeroCodeSpec) or, in the daemon, TOML keys of the same names. Plain data, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace seqpoint::probes {

enum class SlReduce : uint32_t { kFirst = 0, kMax = 1, kLast = 2 };

// Where an iteration's window (its time_ns) begins; it always ends at the first boundary call of
// a burst.
//   kCalls (window=calls, the default): after the last boundary call of the previous burst, so
//          the calls between a burst's first and last boundary calls fall outside (cudnn9-rnn on
//          an encoder-decoder: the encoder's backward after the decoder's backward weights, 0.24
//          of the step on an H100; data-parallel presets: the all-reduce buckets after the first)
//   kStep  (window=step): at the boundary call that ended the previous iteration, so consecutive
//          windows tile the run and an iteration's time is the trainer's whole step (optimizer
//          step, data loading and host gaps included).
// Either way the first iteration after attach begins at its first SL call (or at a boundary seen
// before it), and a measured iteration's collectors begin at its first SL call (its begin hook:
// the SL is known only then).
enum class ZeroCodeWindow : uint32_t { kCalls = 0, kStep = 1 };

struct ZeroCodeProbe {
  std::string name;        // e.g. "miopen-rnn"; names the probe in errors and traces
  std::string library;     // file-name prefix ("libMIOpen.so") or an absolute path
  std::string function;    // the SL function's symbol (C++: mangled)
  uint32_t arg_index = 0;  // 0-based argument index of the SL (x86-64: 0..15)
  uint32_t arg_bytes = 4;  // width of the argument (or of what it points at): 4 or 8
  bool deref = false;      // the argument is a pointer to the value (Fortran BLAS)
  SlReduce reduce = SlReduce::kFirst;
  std::string boundary_library;   // empty: the same as `library`
  std::string boundary_function;  // called once per iteration, at its end
  std::string description;        // one line for --help and the docs
  std::string gate_library;       // empty: the same as `library`
  std::string gate_function;      // empty: no gate (every SL-function call counts)
  uint32_t gate_arg = 0;          // 0-based argument index of the gate's condition (0..15)
  uint64_t gate_value = 0;        // the gate counts only when that argument equals this
  ZeroCodeWindow window = ZeroCodeWindow::kCalls;

  bool gated() const { return !gate_function.empty(); }
  const std::string& gate_lib() const { return gate_library.empty() ? library : gate_library; }

  const std::string& boundary_lib() const {
    return boundary_library.empty() ? library : boundary_library;
  }
  bool operator==(const ZeroCodeProbe&) const = default;
};

// Checks the fields; an absolute library path must exist. Errors name the probe and the field.
Status ValidateZeroCodeProbe(const ZeroCodeProbe& probe);

// Whether a mapped file (absolute path, as the process sees it) is the configured library:
// an absolute `library` must equal it; otherwise `library` must prefix its file name, so
// "libMIOpen.so" matches ".../libMIOpen.so.1.0.50200".
bool LibraryMatches(const std::string& library, const std::string& mapped_path);

// One line on what the probe reads: "SL = argument 2 of f (the largest of an iteration's calls);
// an iteration ends at each call of g (the first of a burst)".
std::string DescribeZeroCodeProbe(const ZeroCodeProbe& probe);

// The shipped presets, in a stable order.
const std::vector<ZeroCodeProbe>& ZeroCodePresets();

// A preset by name; the error lists the names. "NAME:step" (or "NAME:calls") is the preset with
// that window (ZeroCodeWindow), named so.
Result<ZeroCodeProbe> FindZeroCodePreset(std::string_view name);

// Parses "name=N,lib=L,fn=F,arg=I[,bytes=4|8][,deref][,reduce=first|max|last]
// [,boundary_lib=BL],boundary=BF[,gate_lib=GL,gate=GF,gate_arg=J,gate_value=V]
// [,window=calls|step]" into a validated probe.
Result<ZeroCodeProbe> ParseZeroCodeSpec(std::string_view spec);

}  // namespace seqpoint::probes
