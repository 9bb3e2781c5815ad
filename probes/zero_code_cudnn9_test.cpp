// The zero-code presets against the real NVIDIA libraries of a CUDA toolkit (cuDNN 9, cuBLAS 13,
// NCCL): their symbols exist where the presets look, and the cudnn9-rnn preset reads exact
// iterations and SLs from a real process calling the real libcudnn_adv.so.9 as PyTorch does
// (testing/cudnn9_workload.c; no GPU needed: the descriptor calls run on the host, the compute
// calls are entered and return an error). The toolkit is found in $SEQPOINT_CUDA_LIB_DIR, else
// /usr/local/cuda/lib64; without it every case skips and says so.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "probes/discovery/elf_file.h"
#include "probes/iteration_probes.h"
#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"
#include "probes/zero_code_probe.h"

namespace seqpoint::probes {
namespace {

using testing::ChildProcess;
using testing::CollectingSink;
using testing::PollUntil;
using testing::TestProgram;

std::string CudaLib(const std::string& name) {
  const char* dir = std::getenv("SEQPOINT_CUDA_LIB_DIR");
  return std::string(dir && *dir ? dir : "/usr/local/cuda/lib64") + "/" + name;
}

bool Present(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) return true;
  std::fprintf(stderr,
               "SKIP: %s is absent (no CUDA toolkit with cuDNN 9 here; set "
               "SEQPOINT_CUDA_LIB_DIR to its lib64)\n",
               path.c_str());
  return false;
}

bool Defines(const std::string& path, const std::string& fn) {
  auto has = HasFunctionSymbol(path, fn);
  REQUIRE_MESSAGE(has.ok(), has.status().ToString());
  return *has;
}

TEST_CASE("zero-code presets: their functions exist in the toolkit's libraries (nm -D)") {
  const std::string adv = CudaLib("libcudnn_adv.so.9");
  if (!Present(adv)) return;
  ZeroCodeProbe cudnn9 = *FindZeroCodePreset("cudnn9-rnn");
  CHECK(LibraryMatches(cudnn9.library, adv));
  CHECK(Defines(adv, cudnn9.function));
  CHECK(Defines(adv, cudnn9.gate_function));
  CHECK(Defines(adv, cudnn9.boundary_function));
  CHECK(Defines(adv, "cudnnRNNBackwardData_v8"));
  // cuDNN 9 dropped the legacy API the cudnn-rnn preset hooks: it never attaches there.
  ZeroCodeProbe legacy = *FindZeroCodePreset("cudnn-rnn");
  CHECK_FALSE(Defines(adv, legacy.function));
  CHECK_FALSE(Defines(adv, legacy.boundary_function));

  const std::string cublas = CudaLib("libcublas.so.13");
  const std::string nccl = CudaLib("libnccl.so.2");
  if (!Present(cublas) || !Present(nccl)) return;
  for (const char* name : {"cublas-gemm", "cublas-sgemm"}) {
    ZeroCodeProbe p = *FindZeroCodePreset(name);
    INFO(name);
    CHECK(LibraryMatches(p.library, cublas));
    CHECK(Defines(cublas, p.function));
    CHECK(LibraryMatches(p.boundary_lib(), nccl));
    CHECK(Defines(nccl, p.boundary_function));
  }
}

// Runs cudnn9_workload with `probes` configured; returns its iteration ends.
std::vector<IterationEvent> RunCudnn9(const std::vector<ZeroCodeProbe>& zero_code, int iters,
                                      const std::string& sls, int* attached_out,
                                      IterationProbeStats* stats) {
  CollectingSink sink;
  IterationProbesOptions options;
  options.zero_code = zero_code;
  auto probes = IterationProbes::Create(options, &sink);
  REQUIRE_MESSAGE(probes.ok(), probes.status().ToString());
  auto child = ChildProcess::Start({TestProgram("cudnn9_workload"), CudaLib("libcudnn_adv.so.9"),
                                    std::to_string(iters), sls, "--wait"});
  REQUIRE(child.ok());
  auto ready = child->ReadLine();
  REQUIRE_MESSAGE(ready.ok(), ready.status().ToString());
  auto attached = (*probes)->AttachPid(child->pid());
  REQUIRE_MESSAGE(attached.ok(), attached.status().ToString());
  *attached_out = *attached;
  REQUIRE(child->WriteLine("go").ok());
  auto calls = child->ReadLine();
  REQUIRE(calls.ok());
  CHECK(*calls ==
        "calls " + std::to_string(2 * iters + iters / 3) + " " + std::to_string(2 * iters));
  REQUIRE(child->Wait().ok());
  PollUntil([&] { REQUIRE((*probes)->Poll(50).ok()); },
            [&] { return sink.EndsOf(child->pid()).size() >= size_t(iters); });
  REQUIRE((*probes)->Poll(50).ok());
  (*probes)->DetachPid(child->pid());
  *stats = (*probes)->stats();
  return sink.EndsOf(child->pid());
}

TEST_CASE("zero-code cudnn9-rnn: exact iterations and SLs on the real libcudnn_adv.so.9") {
  if (!Present(CudaLib("libcudnn_adv.so.9")) || !testing::CanUseBpf()) return;
  // The daemon's default order: the legacy presets come first and must not attach here.
  std::vector<ZeroCodeProbe> presets = {*FindZeroCodePreset("miopen-rnn"),
                                        *FindZeroCodePreset("cudnn-rnn"),
                                        *FindZeroCodePreset("cudnn9-rnn")};
  const int kIters = 12;
  int attached = 0;
  IterationProbeStats stats;
  auto ends = RunCudnn9(presets, kIters, "5,40,7,128", &attached, &stats);
  CHECK(attached == 3);  // descriptor set, gate (forward), boundary (backward weights)
  REQUIRE(ends.size() == size_t(kIters));
  const uint32_t sls[] = {5, 40, 7, 128};
  for (const IterationEvent& e : ends) {
    INFO("iteration " << e.iter);
    CHECK(e.complete());
    CHECK(e.probe == 3);                      // cudnn9-rnn, the third configured
    CHECK(e.seq_len == sls[e.iter % 4] + 3);  // the decoder's, the largest of the two
    CHECK((e.flags & SP_FLAG_ZERO_CODE) != 0);
  }
  // One empty boundary per iteration (the encoder's backward weights after the decoder's), and
  // no gate without a recorded SL; the evaluation forwards (SL 997) counted nowhere.
  CHECK(stats.kernel[SP_STAT_EMPTY_BOUNDARY] == size_t(kIters));
  CHECK(stats.kernel[SP_STAT_GATE_NO_SL] == 0);
}

TEST_CASE("zero-code cudnn9-rnn:step: windows tile the run, boundary to boundary") {
  if (!Present(CudaLib("libcudnn_adv.so.9")) || !testing::CanUseBpf()) return;
  const int kIters = 12;
  int attached = 0;
  IterationProbeStats stats;
  // The default window: each begins after the encoder's backward weights (the burst's last
  // boundary call), so the encoder's backward falls between two windows.
  auto calls =
      RunCudnn9({*FindZeroCodePreset("cudnn9-rnn")}, kIters, "5,40,7,128", &attached, &stats);
  REQUIRE(calls.size() == size_t(kIters));
  for (size_t i = 1; i < calls.size(); ++i) {
    INFO("window=calls, iteration " << calls[i].iter);
    CHECK(calls[i].begin_ns > calls[i - 1].end_ns);
  }
  // window=step: each begins where the previous ended (the decoder's backward weights).
  auto step_probe = FindZeroCodePreset("cudnn9-rnn:step");
  REQUIRE(step_probe.ok());
  CHECK(step_probe->window == ZeroCodeWindow::kStep);
  CHECK(step_probe->name == "cudnn9-rnn:step");
  auto steps = RunCudnn9({*step_probe}, kIters, "5,40,7,128", &attached, &stats);
  REQUIRE(steps.size() == size_t(kIters));
  const uint32_t sls[] = {5, 40, 7, 128};
  for (size_t i = 0; i < steps.size(); ++i) {
    INFO("window=step, iteration " << steps[i].iter);
    CHECK(steps[i].complete());
    CHECK(steps[i].seq_len == sls[steps[i].iter % 4] + 3);  // the SLs as with the default
    if (i > 0) CHECK(steps[i].begin_ns == steps[i - 1].end_ns);
  }
  CHECK(stats.kernel[SP_STAT_EMPTY_BOUNDARY] == size_t(kIters));  // still counted
  // The share of the span from the first window's begin to the last one's end that windows
  // cover (this workload's cuDNN calls return at once without a GPU: only the mechanism).
  auto covered = [](const std::vector<IterationEvent>& ev) {
    double in = 0;
    for (const IterationEvent& e : ev) in += static_cast<double>(e.end_ns - e.begin_ns);
    return in / static_cast<double>(ev.back().end_ns - ev.front().begin_ns);
  };
  MESSAGE("windows cover " << covered(calls) << " (window=calls) and " << covered(steps)
                           << " (window=step) of the span they run in");
  CHECK(covered(steps) == doctest::Approx(1.0));
}

TEST_CASE("zero-code window: preset suffix and spec key parsed, bad values named") {
  CHECK(FindZeroCodePreset("cudnn9-rnn")->window == ZeroCodeWindow::kCalls);
  CHECK(FindZeroCodePreset("cudnn9-rnn:calls")->window == ZeroCodeWindow::kCalls);
  auto bad = FindZeroCodePreset("cudnn9-rnn:whole");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("cudnn9-rnn:step") != std::string::npos);
  CHECK(FindZeroCodePreset("nope:step").status().message().find("NAME:step") != std::string::npos);
  auto p = ParseZeroCodeSpec("name=g,lib=libfoo.so,fn=f,arg=3,boundary=step_fn,window=step");
  REQUIRE_MESSAGE(p.ok(), p.status().ToString());
  CHECK(p->window == ZeroCodeWindow::kStep);
  CHECK(DescribeZeroCodeProbe(*p).find("windows tile the run") != std::string::npos);
  CHECK(ParseZeroCodeSpec("lib=l,fn=f,arg=1,boundary=b,window=whole")
            .status()
            .message()
            .find("not calls or step") != std::string::npos);
}

TEST_CASE("zero-code gate: a gated probe whose gate never passes yields no iteration") {
  if (!Present(CudaLib("libcudnn_adv.so.9")) || !testing::CanUseBpf()) return;
  ZeroCodeProbe p = *FindZeroCodePreset("cudnn9-rnn");
  p.name = "inference-only";
  p.gate_value = 7;  // no fwdMode is 7
  int attached = 0;
  IterationProbeStats stats;
  CollectingSink sink;
  IterationProbesOptions options;
  options.zero_code = {p};
  auto probes = IterationProbes::Create(options, &sink);
  REQUIRE(probes.ok());
  auto child = ChildProcess::Start(
      {TestProgram("cudnn9_workload"), CudaLib("libcudnn_adv.so.9"), "6", "9", "--wait"});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  auto n = (*probes)->AttachPid(child->pid());
  REQUIRE(n.ok());
  attached = *n;
  CHECK(attached == 3);
  REQUIRE(child->WriteLine("go").ok());
  REQUIRE(child->Wait().ok());
  REQUIRE((*probes)->Poll(100).ok());
  (*probes)->DetachPid(child->pid());
  CHECK(sink.EndsOf(child->pid()).empty());
  stats = (*probes)->stats();
  // Every backward-weights call is a boundary with no SL call: the first after attach starts
  // iteration 0, the other 11 are counted empty.
  CHECK(stats.kernel[SP_STAT_EMPTY_BOUNDARY] == 11);
}

TEST_CASE("zero-code spec: gate keys parsed and validated") {
  auto p = ParseZeroCodeSpec(
      "name=g,lib=libfoo.so,fn=set_desc,arg=3,gate=forward,gate_arg=2,gate_value=1,"
      "boundary=step");
  REQUIRE_MESSAGE(p.ok(), p.status().ToString());
  CHECK(p->gated());
  CHECK(p->gate_lib() == "libfoo.so");
  CHECK(p->gate_arg == 2);
  CHECK(p->gate_value == 1);
  CHECK(DescribeZeroCodeProbe(*p).find("before each forward whose argument 2 is 1") !=
        std::string::npos);
  CHECK(ParseZeroCodeSpec("lib=l,fn=f,arg=1,boundary=b,gate=g,gate_arg=16")
            .status()
            .message()
            .find("gate_arg=16") != std::string::npos);
  CHECK(ParseZeroCodeSpec("lib=l,fn=f,arg=1,boundary=b,gate=g,gate_value=4294967296")
            .status()
            .message()
            .find("32-bit") != std::string::npos);
  CHECK(ParseZeroCodeSpec("lib=l,fn=f,arg=1,boundary=b,gate_lib=x")
            .status()
            .message()
            .find("gate_lib is set but gate is not") != std::string::npos);
}

}  // namespace
}  // namespace seqpoint::probes
