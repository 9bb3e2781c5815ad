// The zero-code probe keys of seqpointd's config: defaults, parsing, priority order, and errors
// that name the file, line, key and fix. No root needed.
#include "agent/config/config_zero_code.h"

#include <doctest/doctest.h>

#include "agent/config/config.h"
#include "agent/config/config_validate.h"

using namespace seqpoint::daemon;

namespace {

std::string ErrorOf(const std::string& toml) {
  auto cfg = ParseConfig(toml, "z.toml");
  REQUIRE_MESSAGE(!cfg.ok(), toml);
  return cfg.status().message();
}

bool Has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  MESSAGE("'" << part << "' not in: " << text);
  return false;
}

}  // namespace

TEST_CASE("agent config zero-code: the RNN presets are on by default, GEMM ones opt-in") {
  auto cfg = ParseConfig("", "empty.toml");
  REQUIRE(cfg.ok());
  CHECK(cfg->probes_zero_code == std::vector<std::string>{"miopen-rnn", "cudnn-rnn", "cudnn9-rnn"});
  CHECK(cfg->probes_zero_code_custom.empty());
  auto probes = ResolveZeroCodeProbes(*cfg);
  REQUIRE(probes.ok());
  REQUIRE(probes->size() == 3);
  CHECK((*probes)[0].function == "miopenRNNForwardTraining");
  CHECK((*probes)[2].gate_function == "cudnnRNNForward");
  std::string doc = DefaultConfigToml();
  CHECK(Has(doc, "# zero_code = [\"miopen-rnn\", \"cudnn-rnn\", \"cudnn9-rnn\"]\n"));
  CHECK(Has(doc, "# zero_code_custom = {}\n"));
  CHECK(Has(doc, "# zero_code_custom.<name>.boundary_function = 'my_optimizer_step'\n"));
  CHECK(Has(doc, "cublas-gemm"));  // the opt-in presets and their cost are documented
  CHECK(Has(doc, "per GEMM call"));
}

TEST_CASE("agent config zero-code: presets by name and custom tables, custom ones first") {
  auto cfg = ParseConfig(R"([probes]
zero_code = ["cublas-gemm", "miopen-rnn"]

[probes.zero_code_custom.zz-rnn]
library = "libmyrnn.so"
function = "my_rnn_forward"
arg = 2
reduce = "max"
window = "step"
boundary_function = "my_step"

[probes.zero_code_custom.blas]
library = "libopenblas.so"
function = "sgemm_"
arg = 3
bytes = 8
deref = true
boundary_library = "libtorch_cpu.so"
boundary_function = "_ZN5torch5optim4Adam4stepESt8functionIFN2at6TensorEvEE"
)",
                         "z.toml");
  REQUIRE_MESSAGE(cfg.ok(), cfg.status().ToString());
  auto probes = ResolveZeroCodeProbes(*cfg);
  REQUIRE(probes.ok());
  REQUIRE(probes->size() == 4);
  CHECK((*probes)[0].name == "blas");
  CHECK((*probes)[0].arg_index == 3);
  CHECK((*probes)[0].arg_bytes == 8);
  CHECK((*probes)[0].deref);
  CHECK((*probes)[0].boundary_lib() == "libtorch_cpu.so");
  CHECK((*probes)[1].name == "zz-rnn");
  CHECK((*probes)[1].reduce == seqpoint::probes::SlReduce::kMax);
  CHECK((*probes)[1].window == seqpoint::probes::ZeroCodeWindow::kStep);
  CHECK((*probes)[0].window == seqpoint::probes::ZeroCodeWindow::kCalls);  // the default
  CHECK((*probes)[1].boundary_lib() == "libmyrnn.so");
  CHECK((*probes)[2].name == "cublas-gemm");
  CHECK((*probes)[3].name == "miopen-rnn");
  // Dotted keys and an empty list work too.
  auto dotted = ParseConfig(
      "[probes]\nzero_code = []\nzero_code_custom.x.library = \"l\"\n"
      "zero_code_custom.x.function = \"f\"\nzero_code_custom.x.arg = 0\n"
      "zero_code_custom.x.boundary_function = \"g\"\n",
      "d.toml");
  REQUIRE_MESSAGE(dotted.ok(), dotted.status().ToString());
  CHECK(dotted->probes_zero_code.empty());
  CHECK(dotted->probes_zero_code_custom.size() == 1);
}

TEST_CASE("agent config zero-code: an unknown preset names the line and lists the presets") {
  std::string m = ErrorOf("[probes]\n\nzero_code = [\"miopen-rnn\", \"lstm\"]\n");
  CHECK(Has(m, "z.toml:3:"));
  CHECK(Has(m, "'probes.zero_code'"));
  CHECK(Has(m, "no zero-code preset 'lstm'"));
  CHECK(Has(m,
            "miopen-rnn, cudnn-rnn, cudnn9-rnn, rocblas-gemm, cublas-gemm, cublas-sgemm, "
            "torch-cpu-adam, torch-cpu-sgd"));
  CHECK(Has(m, "[probes.zero_code_custom.NAME]"));
  CHECK(Has(ErrorOf("[probes]\nzero_code = [\"cudnn-rnn\", \"cudnn-rnn\"]\n"), "twice"));
  CHECK(Has(ErrorOf("[probes]\nzero_code = \"cudnn-rnn\"\n"), "array of preset names"));
}

TEST_CASE("agent config zero-code: a bad custom field names its own line, the key and the fix") {
  const std::string head =
      "[probes.zero_code_custom.mine]\nlibrary = \"libx.so\"\nfunction = \"f\"\n"
      "boundary_function = \"g\"\n";
  std::string m = ErrorOf(head + "arg = 99\n");
  CHECK(Has(m, "z.toml:5:7: key 'probes.zero_code_custom.mine.arg' must be between 0 and 15"));
  m = ErrorOf(head + "arg = 1\nbytes = 2\n");
  CHECK(Has(m, "z.toml:6:"));
  CHECK(Has(m, "must be 4 or 8"));
  m = ErrorOf(head + "arg = 1\nreduce = \"mean\"\n");
  CHECK(Has(m, "\"first\", \"max\" or \"last\""));
  m = ErrorOf(head + "arg = 1\nwindow = \"gate\"\n");
  CHECK(Has(m, "'probes.zero_code_custom.mine.window' must be \"calls\" or \"step\""));
  m = ErrorOf(head + "arg = 1\nargument = 2\n");
  CHECK(Has(m, "z.toml:6:1: unknown key 'probes.zero_code_custom.mine.argument'"));
  CHECK(Has(m,
            "library, function, arg, bytes, deref, reduce, window, boundary_library, "
            "boundary_function"));
  m = ErrorOf(head);  // arg missing
  CHECK(Has(m, "z.toml:1:1: 'probes.zero_code_custom.mine' has no arg: set arg = "));
  m = ErrorOf(
      "[probes.zero_code_custom.mine]\nlibrary = \"/nonexistent/libx.so\"\n"
      "function = \"f\"\narg = 1\nboundary_function = \"g\"\n");
  CHECK(Has(m, "/nonexistent/libx.so does not exist"));
  m = ErrorOf(
      "[probes.zero_code_custom.cudnn-rnn]\nlibrary = \"l\"\nfunction = \"f\"\n"
      "arg = 1\nboundary_function = \"g\"\n");
  CHECK(Has(m, "'cudnn-rnn' is a preset's name"));
  m = ErrorOf("[probes]\nzero_code_custom = 3\n");
  CHECK(Has(m, "z.toml:2:"));
  CHECK(Has(m, "table of probe tables"));
}

TEST_CASE("agent config zero-code: a gated custom probe (MIOpen's sequence-tensor RNN API)") {
  // MIOpen 3's miopenSetRNNDataSeqTensorDescriptor(desc, type, layout, maxSequenceLen, ...) and
  // miopenRNNForward(handle, rnnDesc, fwdMode, xDesc, ...): the same shape as cuDNN 9's.
  auto cfg = ParseConfig(
      "[probes.zero_code_custom.miopen-seq]\nlibrary = \"libMIOpen.so\"\n"
      "function = \"miopenSetRNNDataSeqTensorDescriptor\"\narg = 3\nreduce = \"max\"\n"
      "gate_function = \"miopenRNNForward\"\ngate_arg = 2\ngate_value = 0\n"
      "boundary_function = \"miopenRNNBackwardWeightsSeqTensor\"\n",
      "z.toml");
  REQUIRE_MESSAGE(cfg.ok(), cfg.status().ToString());
  REQUIRE(cfg->probes_zero_code_custom.size() == 1);
  const auto& p = cfg->probes_zero_code_custom[0];
  CHECK(p.gated());
  CHECK(p.gate_function == "miopenRNNForward");
  CHECK(p.gate_arg == 2);
  CHECK(p.gate_value == 0);
  CHECK(p.gate_lib() == "libMIOpen.so");
  const std::string head =
      "[probes.zero_code_custom.mine]\nlibrary = \"libx.so\"\nfunction = \"f\"\narg = 1\n"
      "boundary_function = \"g\"\ngate_function = \"h\"\n";
  CHECK(Has(ErrorOf(head + "gate_arg = 16\n"), "'probes.zero_code_custom.mine.gate_arg' must be"));
  CHECK(Has(ErrorOf(head + "gate_value = -1\n"), "from 0 to 4294967295"));
  CHECK(Has(ErrorOf(head + "gate_value = 4294967296\n"), "from 0 to 4294967295"));
}

TEST_CASE("agent config zero-code: more probes than the BPF table holds is refused") {
  DaemonConfig c;
  for (int i = 0; i < 15; ++i) {
    seqpoint::probes::ZeroCodeProbe p;
    p.name = "p" + std::to_string(i);
    p.library = "libx.so";
    p.function = "f";
    p.boundary_function = "g";
    c.probes_zero_code_custom.push_back(p);
  }
  seqpoint::Status st = ValidateConfig(c);  // 15 custom + 3 default presets
  REQUIRE(!st.ok());
  CHECK(Has(st.message(), "18 zero-code probes configured"));
}
