// See zero_code_probe.h. Argument positions come from each library's public header:
//  - MIOpen miopen.h: miopenRNNForwardTraining(handle, rnnDesc, const int sequenceLen, ...),
//    miopenRNNBackwardWeights(handle, rnnDesc, const int sequenceLen, ...).
//  - cuDNN 7/8 cudnn_adv_train.h: cudnnRNNForwardTraining(handle, rnnDesc, const int seqLength,
//    ...), cudnnRNNBackwardWeights(...).
//  - rocBLAS rocblas-functions.h / cuBLAS cublas_api.h: *_gemm_ex / cublasGemmEx(handle, transa,
//    transb, m, n, k, ...): for a linear layer y = x W^T on column-major BLAS, n is the token
//    count (batch x SL).
//  - Reference BLAS (OpenBLAS): sgemm_(char* transa, char* transb, int* m, int* n, int* k, ...),
//    by pointer (Fortran); libtorch's CPU GEMMs go through it.
//  - cuDNN 9 cudnn_adv.h: cudnnSetRNNDataDescriptor(rnnDataDesc, dataType, layout, int
//    maxSeqLength, batchSize, vectorSize, seqLengthArray, paddingFill); cudnnRNNForward(handle,
//    rnnDesc, cudnnForwardMode_t fwdMode, devSeqLengths, xDesc, ...), CUDNN_FWD_MODE_TRAINING = 1;
//    cudnnRNNBackwardData_v8 / cudnnRNNBackwardWeights_v8 (libcudnn_adv.so.9, CUDA 13 toolkit).
//    PyTorch's aten/src/ATen/native/cudnn/RNN.cpp sets the x and y data descriptors before every
//    forward and backward call, so only the gate (a training forward) tells an iteration's SL.
//  - cuBLAS 13 cublas_api.h: cublasGemmEx / cublasSgemm_v2(handle, transa, transb, m, n, k, ...)
//    (also _64 variants with int64_t dims, not hooked: PyTorch uses the int ones).
//  - NCCL/RCCL nccl.h: ncclAllReduce(...) ends the backward pass of data-parallel training.
#include "probes/zero_code_probe.h"

#include <sys/stat.h>

#include <charconv>
#include <optional>

namespace seqpoint::probes {
namespace {

constexpr uint32_t kMaxArgIndex = 15;

// File name of a path (this file is built without proc_reader: see collectors/CMakeLists.txt).
std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

ZeroCodeProbe Preset(std::string name, std::string library, std::string function, uint32_t arg,
                     SlReduce reduce, std::string boundary_library, std::string boundary,
                     std::string description) {
  ZeroCodeProbe p;
  p.name = std::move(name);
  p.library = std::move(library);
  p.function = std::move(function);
  p.arg_index = arg;
  p.reduce = reduce;
  p.boundary_library = std::move(boundary_library);
  p.boundary_function = std::move(boundary);
  p.description = std::move(description);
  return p;
}

std::vector<ZeroCodeProbe> MakePresets() {
  std::vector<ZeroCodeProbe> p;
  p.push_back(Preset("miopen-rnn", "libMIOpen.so", "miopenRNNForwardTraining", 2, SlReduce::kMax,
                     "", "miopenRNNBackwardWeights",
                     "AMD MIOpen RNN: SL = sequenceLen of the forward call (largest if several)"));
  p.push_back(Preset("cudnn-rnn", "libcudnn", "cudnnRNNForwardTraining", 2, SlReduce::kMax, "",
                     "cudnnRNNBackwardWeights",
                     "NVIDIA cuDNN 7/8 legacy RNN API: SL = seqLength of the forward call"));
  // cuDNN 9 (every current PyTorch): the SL is in the RNN data descriptor, set before each
  // forward and again before each backward call; only a training forward is an iteration's.
  ZeroCodeProbe cudnn9 =
      Preset("cudnn9-rnn", "libcudnn_adv.so", "cudnnSetRNNDataDescriptor", 3, SlReduce::kMax, "",
             "cudnnRNNBackwardWeights_v8",
             "NVIDIA cuDNN 9 RNN API: SL = maxSeqLength of the data descriptor of each training "
             "cudnnRNNForward (largest if several); boundary: cudnnRNNBackwardWeights_v8");
  cudnn9.gate_function = "cudnnRNNForward";
  cudnn9.gate_arg = 2;    // cudnnForwardMode_t fwdMode
  cudnn9.gate_value = 1;  // CUDNN_FWD_MODE_TRAINING
  p.push_back(std::move(cudnn9));
  // GEMM presets take the iteration's first GEMM: the first layer's projection, whose n is the
  // padded token count (SL x batch). The largest n is the output projection's vocabulary size,
  // the same every iteration (measured on examples/seqpoint-train: first = SL x batch on 60/60
  // iterations; max = 2826, the German vocabulary, on all of them).
  p.push_back(Preset("rocblas-gemm", "librocblas.so", "rocblas_gemm_ex", 4, SlReduce::kFirst,
                     "librccl.so", "ncclAllReduce",
                     "AMD rocBLAS: SL x batch = n of the iteration's first GEMM; boundary: RCCL "
                     "all-reduce"));
  p.push_back(Preset("cublas-gemm", "libcublas.so", "cublasGemmEx", 4, SlReduce::kFirst,
                     "libnccl.so", "ncclAllReduce",
                     "NVIDIA cuBLAS: SL x batch = n of the iteration's first GEMM; boundary: NCCL "
                     "all-reduce"));
  // PyTorch's FP32 GEMMs call cublasSgemm_v2 (half/bf16 ones cublasGemmEx): same n argument.
  p.push_back(Preset("cublas-sgemm", "libcublas.so", "cublasSgemm_v2", 4, SlReduce::kFirst,
                     "libnccl.so", "ncclAllReduce",
                     "NVIDIA cuBLAS FP32: SL x batch = n of the iteration's first cublasSgemm_v2; "
                     "boundary: NCCL all-reduce"));
  ZeroCodeProbe torch_adam =
      Preset("torch-cpu-adam", "libblas.so", "sgemm_", 3, SlReduce::kFirst, "libtorch_cpu.so",
             "_ZN5torch5optim4Adam4stepESt8functionIFN2at6TensorEvEE",
             "libtorch (C++) on CPU: SL x batch = n of the first BLAS sgemm; boundary: "
             "torch::optim::Adam::step");
  torch_adam.deref = true;
  p.push_back(torch_adam);
  ZeroCodeProbe torch_sgd = torch_adam;
  torch_sgd.name = "torch-cpu-sgd";
  torch_sgd.boundary_function = "_ZN5torch5optim3SGD4stepESt8functionIFN2at6TensorEvEE";
  torch_sgd.description =
      "libtorch (C++) on CPU: SL x batch = n of the first BLAS sgemm; boundary: "
      "torch::optim::SGD::step";
  p.push_back(std::move(torch_sgd));
  return p;
}

Status CheckLibrary(const ZeroCodeProbe& p, const std::string& lib, const char* field) {
  if (lib.empty())
    return InvalidArgument("zero-code probe '" + p.name + "': " + field +
                           " is empty: give a file name prefix or a path");
  if (lib[0] != '/') return Status::Ok();
  struct stat st {};
  if (stat(lib.c_str(), &st) != 0) {
    return NotFound("zero-code probe '" + p.name + "': " + field + " " + lib +
                    " does not exist: fix the path, or give a file name prefix (e.g. " +
                    BaseName(lib) + ") to match wherever a process loads it from");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateZeroCodeProbe(const ZeroCodeProbe& p) {
  std::string who = "zero-code probe '" + p.name + "'";
  if (p.name.empty()) return InvalidArgument("a zero-code probe has no name: set name=");
  if (p.function.empty()) return InvalidArgument(who + ": no SL function: set fn=");
  if (p.boundary_function.empty()) {
    return InvalidArgument(who +
                           ": no boundary function: set boundary= to a function called "
                           "once per iteration (e.g. the optimizer step)");
  }
  if (p.arg_index > kMaxArgIndex) {
    return InvalidArgument(who + ": arg=" + std::to_string(p.arg_index) +
                           " is out of range: " + "0.." + std::to_string(kMaxArgIndex));
  }
  if (p.arg_bytes != 4 && p.arg_bytes != 8) {
    return InvalidArgument(who + ": bytes=" + std::to_string(p.arg_bytes) +
                           " is not 4 (int) or 8 (long, size_t)");
  }
  if (p.gated() && p.gate_arg > kMaxArgIndex) {
    return InvalidArgument(who + ": gate_arg=" + std::to_string(p.gate_arg) +
                           " is out of range: " + "0.." + std::to_string(kMaxArgIndex));
  }
  if (p.gated() && p.gate_value > 0xffffffffull) {
    return InvalidArgument(who + ": gate_value=" + std::to_string(p.gate_value) +
                           " does not fit the 32-bit argument (an enum or int) a gate compares");
  }
  if (!p.gated() && !p.gate_library.empty()) {
    return InvalidArgument(who + ": gate_lib is set but gate is not: name the gate function");
  }
  SEQPOINT_RETURN_IF_ERROR(CheckLibrary(p, p.library, "lib"));
  if (p.gated()) SEQPOINT_RETURN_IF_ERROR(CheckLibrary(p, p.gate_lib(), "gate_lib"));
  return CheckLibrary(p, p.boundary_lib(), "boundary_lib");
}

bool LibraryMatches(const std::string& library, const std::string& mapped_path) {
  if (library.empty()) return false;
  if (library[0] == '/') return library == mapped_path;
  return BaseName(mapped_path).starts_with(library);
}

std::string DescribeZeroCodeProbe(const ZeroCodeProbe& p) {
  const char* which = p.reduce == SlReduce::kMax    ? "the largest of"
                      : p.reduce == SlReduce::kLast ? "the last of"
                                                    : "the first of";
  std::string sl = std::string(p.deref ? "*" : "") + "argument " + std::to_string(p.arg_index) +
                   " of " + p.function;
  if (p.gated()) {
    sl = "the thread's last " + sl + " before each " + p.gate_function + " whose argument " +
         std::to_string(p.gate_arg) + " is " + std::to_string(p.gate_value);
  }
  return "SL = " + sl + " (" + which + " an iteration's calls); an iteration ends at each " +
         "call of " + p.boundary_function + " (the first of a burst)" +
         (p.window == ZeroCodeWindow::kStep
              ? " and the next begins there (window=step: windows tile the run)"
              : "");
}

const std::vector<ZeroCodeProbe>& ZeroCodePresets() {
  static const std::vector<ZeroCodeProbe> presets = MakePresets();
  return presets;
}

Result<ZeroCodeProbe> FindZeroCodePreset(std::string_view name) {
  // "NAME:step" / "NAME:calls": the preset with that window.
  const size_t colon = name.find(':');
  const std::string_view base = name.substr(0, colon);
  std::optional<ZeroCodeWindow> window;
  if (colon != std::string_view::npos) {
    const std::string_view w = name.substr(colon + 1);
    if (w == "step") {
      window = ZeroCodeWindow::kStep;
    } else if (w == "calls") {
      window = ZeroCodeWindow::kCalls;
    } else {
      return InvalidArgument("zero-code preset '" + std::string(name) + "': window '" +
                             std::string(w) + "' is not calls or step (e.g. " + std::string(base) +
                             ":step)");
    }
  }
  std::string names;
  for (const ZeroCodeProbe& p : ZeroCodePresets()) {
    if (p.name == base) {
      if (!window) return p;
      ZeroCodeProbe q = p;
      q.name = std::string(name);
      q.window = *window;
      return q;
    }
    names += (names.empty() ? "" : ", ") + p.name;
  }
  return NotFound("no zero-code preset named '" + std::string(base) + "'; presets: " + names +
                  " (each also as NAME:step, windows that tile the run)");
}

Result<ZeroCodeProbe> ParseZeroCodeSpec(std::string_view spec) {
  ZeroCodeProbe p;
  p.name = "custom";
  std::string_view rest = spec;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    size_t eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string value(eq == std::string_view::npos ? "" : item.substr(eq + 1));
    auto bad = [&](std::string why) {
      return InvalidArgument("zero-code spec '" + std::string(spec) + "': " + std::string(key) +
                             ": " + why);
    };
    auto number = [&](uint32_t* out) {
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), *out);
      return ec == std::errc() && ptr == value.data() + value.size();
    };
    if (key == "deref" && eq == std::string_view::npos) {
      p.deref = true;
    } else if (eq == std::string_view::npos || value.empty()) {
      return bad(
          "expected key=value (keys: name, lib, fn, arg, bytes, deref, reduce, "
          "boundary_lib, boundary, gate_lib, gate, gate_arg, gate_value, window)");
    } else if (key == "name") {
      p.name = value;
    } else if (key == "lib") {
      p.library = value;
    } else if (key == "fn") {
      p.function = value;
    } else if (key == "arg") {
      if (!number(&p.arg_index)) return bad("'" + value + "' is not an argument index");
    } else if (key == "bytes") {
      if (!number(&p.arg_bytes)) return bad("'" + value + "' is not 4 or 8");
    } else if (key == "reduce") {
      if (value == "first")
        p.reduce = SlReduce::kFirst;
      else if (value == "max")
        p.reduce = SlReduce::kMax;
      else if (value == "last")
        p.reduce = SlReduce::kLast;
      else
        return bad("'" + value + "' is not first, max or last");
    } else if (key == "boundary_lib") {
      p.boundary_library = value;
    } else if (key == "boundary") {
      p.boundary_function = value;
    } else if (key == "gate_lib") {
      p.gate_library = value;
    } else if (key == "gate") {
      p.gate_function = value;
    } else if (key == "gate_arg") {
      if (!number(&p.gate_arg)) return bad("'" + value + "' is not an argument index");
    } else if (key == "gate_value") {
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), p.gate_value);
      if (ec != std::errc() || ptr != value.data() + value.size())
        return bad("'" + value + "' is not a non-negative integer");
    } else if (key == "window") {
      if (value == "calls")
        p.window = ZeroCodeWindow::kCalls;
      else if (value == "step")
        p.window = ZeroCodeWindow::kStep;
      else
        return bad("'" + value + "' is not calls or step");
    } else {
      return bad(
          "unknown key (keys: name, lib, fn, arg, bytes, deref, reduce, boundary_lib, "
          "boundary, gate_lib, gate, gate_arg, gate_value, window)");
    }
  }
  SEQPOINT_RETURN_IF_ERROR(ValidateZeroCodeProbe(p));
  return p;
}

}  // namespace seqpoint::probes
