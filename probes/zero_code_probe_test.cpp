// Zero-code probes: configuration parsing (no root), then real uprobes on a real process that
// calls libseqpoint_mimic_rnn.so, a small library shaped like MIOpen / BLAS (testing/).
#include "probes/zero_code_probe.h"

#include <doctest/doctest.h>

#include <set>

#include "probes/iteration_probes.h"
#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"

namespace seqpoint::probes {
namespace {

using testing::ChildProcess;
using testing::CollectingSink;
using testing::PollUntil;
using testing::TestProgram;

ZeroCodeProbe Mimic(std::string fn, uint32_t arg, std::string boundary) {
  ZeroCodeProbe p;
  p.name = "mimic";
  p.library = "libseqpoint_mimic_rnn.so";
  p.function = std::move(fn);
  p.arg_index = arg;
  p.boundary_function = std::move(boundary);
  return p;
}

// Runs mimic_workload PATTERN with `probe` attached; returns its iterations.
std::vector<IterationEvent> RunMimic(const ZeroCodeProbe& probe, const std::string& pattern,
                                     int iters, const std::string& sls,
                                     IterationProbeStats* stats = nullptr) {
  CollectingSink sink;
  IterationProbesOptions options;
  options.zero_code = {probe};
  auto probes = IterationProbes::Create(options, &sink);
  REQUIRE_MESSAGE(probes.ok(), probes.status().ToString());
  auto child = ChildProcess::Start(
      {TestProgram("mimic_workload"), pattern, std::to_string(iters), sls, "--wait"});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  auto attached = (*probes)->AttachPid(child->pid());
  REQUIRE_MESSAGE(attached.ok(), attached.status().ToString());
  CHECK(*attached == 2);  // SL function + boundary
  REQUIRE(child->WriteLine("go").ok());
  REQUIRE(child->Wait().ok());
  REQUIRE(PollUntil([&] { REQUIRE((*probes)->Poll(50).ok()); },
                    [&] { return sink.EndsOf(child->pid()).size() >= size_t(iters); }));
  (*probes)->DetachPid(child->pid());
  if (stats != nullptr) *stats = (*probes)->stats();
  return sink.EndsOf(child->pid());
}

TEST_CASE("zero-code spec: parsed, validated, errors name the key") {
  auto p = ParseZeroCodeSpec(
      "name=x,lib=libfoo.so,fn=foo,arg=3,bytes=8,deref,reduce=max,"
      "boundary_lib=libbar.so,boundary=bar");
  REQUIRE_MESSAGE(p.ok(), p.status().ToString());
  CHECK(p->name == "x");
  CHECK(p->arg_index == 3);
  CHECK(p->arg_bytes == 8);
  CHECK(p->deref);
  CHECK(p->reduce == SlReduce::kMax);
  CHECK(p->boundary_lib() == "libbar.so");

  auto no_boundary = ParseZeroCodeSpec("lib=libfoo.so,fn=foo,arg=1");
  CHECK(no_boundary.status().message().find("boundary") != std::string::npos);
  auto bad_bytes = ParseZeroCodeSpec("lib=l,fn=f,arg=1,bytes=3,boundary=b");
  CHECK(bad_bytes.status().message().find("bytes=3") != std::string::npos);
  auto bad_arg = ParseZeroCodeSpec("lib=l,fn=f,arg=99,boundary=b");
  CHECK(bad_arg.status().message().find("arg=99") != std::string::npos);
  auto bad_key = ParseZeroCodeSpec("lib=l,fn=f,colour=blue,boundary=b");
  CHECK(bad_key.status().message().find("colour") != std::string::npos);
  auto missing = ParseZeroCodeSpec("lib=/nonexistent/libfoo.so,fn=f,arg=1,boundary=b");
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  CHECK(missing.status().message().find("/nonexistent/libfoo.so does not exist") !=
        std::string::npos);
}

TEST_CASE("zero-code presets: unique names, valid, found by name") {
  std::set<std::string> names;
  for (const ZeroCodeProbe& p : ZeroCodePresets()) {
    CHECK(names.insert(p.name).second);
    CHECK(ValidateZeroCodeProbe(p).ok());
    CHECK_FALSE(p.description.empty());
  }
  CHECK(FindZeroCodePreset("miopen-rnn").ok());
  auto none = FindZeroCodePreset("nope");
  CHECK(none.status().message().find("miopen-rnn") != std::string::npos);
  CHECK(LibraryMatches("libMIOpen.so", "/opt/rocm/lib/libMIOpen.so.1.0.50200"));
  CHECK_FALSE(LibraryMatches("libMIOpen.so", "/opt/rocm/lib/libMIOpenGEMM.so"));
  CHECK(LibraryMatches("/opt/x/libfoo.so", "/opt/x/libfoo.so"));
}

TEST_CASE("zero-code: RNN forward SL, reduced to the max, boundary at the optimizer step") {
  if (!testing::CanUseBpf()) return;
  ZeroCodeProbe probe = Mimic("mimicRNNForwardTraining", 2, "mimicOptimizerStep");
  probe.reduce = SlReduce::kMax;
  auto ends = RunMimic(probe, "rnn", 12, "5,40,7");
  REQUIRE(ends.size() == 12);
  const int sls[] = {5, 40, 7};
  for (const IterationEvent& e : ends) {
    CHECK(e.complete());
    CHECK(e.seq_len == uint32_t(sls[e.iter % 3] + 3));  // decoder's SL (encoder's + 3) is max
    CHECK((e.flags & SP_FLAG_ZERO_CODE) != 0);
    CHECK(e.probe == 1);
  }
}

TEST_CASE("zero-code: a burst of boundary calls ends the iteration once") {
  if (!testing::CanUseBpf()) return;
  // miopen-rnn style: the boundary is the backward-weights call, made twice per iteration.
  ZeroCodeProbe probe = Mimic("mimicRNNForwardTraining", 2, "mimicRNNBackwardWeights");
  IterationProbeStats stats;
  auto ends = RunMimic(probe, "rnn", 10, "9", &stats);
  REQUIRE(ends.size() == 10);
  for (const IterationEvent& e : ends) CHECK(e.seq_len == 9);  // reduce=first: the encoder's
  CHECK(stats.kernel[SP_STAT_EMPTY_BOUNDARY] == 10);
}

TEST_CASE("zero-code: a Fortran BLAS argument by pointer (deref), largest GEMM n") {
  if (!testing::CanUseBpf()) return;
  ZeroCodeProbe probe = Mimic("mimic_sgemm_", 3, "mimicOptimizerStep");
  probe.deref = true;
  probe.reduce = SlReduce::kMax;
  auto ends = RunMimic(probe, "gemm", 9, "3,11,100");
  REQUIRE(ends.size() == 9);
  const uint32_t sls[] = {3, 11, 100};
  for (const IterationEvent& e : ends) CHECK(e.seq_len == sls[e.iter % 3] * 8);
  probe.reduce = SlReduce::kLast;
  for (const IterationEvent& e : RunMimic(probe, "gemm", 3, "5")) CHECK(e.seq_len == 7);
}

TEST_CASE("zero-code: the SL in a stack argument (the 8th) of 8 bytes") {
  if (!testing::CanUseBpf()) return;
  ZeroCodeProbe probe = Mimic("mimicWideCall", 7, "mimicOptimizerStep");
  probe.arg_bytes = 8;
  auto ends = RunMimic(probe, "wide", 6, "21,4096");
  REQUIRE(ends.size() == 6);
  for (const IterationEvent& e : ends) CHECK(e.seq_len == (e.iter % 2 == 0 ? 21u : 4096u));
}

TEST_CASE("zero-code: a new probe set applies to new attaches, attached processes keep theirs") {
  if (!testing::CanUseBpf()) return;
  CollectingSink sink;
  IterationProbesOptions options;
  ZeroCodeProbe gemm = Mimic("mimic_sgemm_", 3, "mimicOptimizerStep");
  gemm.name = "gemm";
  gemm.deref = true;
  options.zero_code = {gemm};
  auto probes = IterationProbes::Create(options, &sink);
  REQUIRE(probes.ok());
  auto old_child =
      ChildProcess::Start({TestProgram("mimic_workload"), "gemm", "5", "10", "--wait"});
  REQUIRE(old_child.ok());
  REQUIRE(old_child->ReadLine().ok());
  REQUIRE((*probes)->AttachPid(old_child->pid()).ok());
  // A second probe on the same library: one probe per process, the first configured wins.
  ZeroCodeProbe rnn = Mimic("mimicRNNForwardTraining", 2, "mimicRNNBackwardWeights");
  rnn.name = "rnn";
  REQUIRE((*probes)->SetZeroCodeProbes({rnn, gemm}).ok());
  REQUIRE((*probes)->AttachPid(old_child->pid()).ok());  // re-examined: keeps its gemm probe
  REQUIRE((*probes)->AttachedZeroCodeProbe(old_child->pid()) != nullptr);
  CHECK((*probes)->AttachedZeroCodeProbe(old_child->pid())->name == "gemm");
  REQUIRE((*probes)->SetZeroCodeProbes({rnn}).ok());  // gemm's slot stays: still in use
  auto new_child = ChildProcess::Start({TestProgram("mimic_workload"), "rnn", "4", "20", "--wait"});
  REQUIRE(new_child.ok());
  REQUIRE(new_child->ReadLine().ok());
  REQUIRE((*probes)->AttachPid(new_child->pid()).ok());
  CHECK((*probes)->AttachedZeroCodeProbe(new_child->pid())->name == "rnn");
  REQUIRE(old_child->WriteLine("go").ok());
  REQUIRE(new_child->WriteLine("go").ok());
  REQUIRE(old_child->Wait().ok());
  REQUIRE(new_child->Wait().ok());
  REQUIRE(PollUntil([&] { REQUIRE((*probes)->Poll(50).ok()); },
                    [&] {
                      return sink.EndsOf(old_child->pid()).size() >= 5 &&
                             sink.EndsOf(new_child->pid()).size() >= 4;
                    }));
  for (const IterationEvent& e : sink.EndsOf(old_child->pid())) {
    CHECK(e.seq_len == 40);  // the first sgemm_'s n = SL x 4
    REQUIRE((*probes)->ZeroCodeProbeOf(e.probe) != nullptr);
    CHECK((*probes)->ZeroCodeProbeOf(e.probe)->name == "gemm");
  }
  for (const IterationEvent& e : sink.EndsOf(new_child->pid())) {
    CHECK(e.seq_len == 20);  // the encoder's forward call (reduce first)
    CHECK((*probes)->ZeroCodeProbeOf(e.probe)->name == "rnn");
  }
}

TEST_CASE("zero-code: a library without symbols is a clear error naming it") {
  if (!testing::CanUseBpf()) return;
  CollectingSink sink;
  IterationProbesOptions options;
  ZeroCodeProbe probe = Mimic("mimicRNNForwardTraining", 2, "mimicOptimizerStep");
  probe.library = "libseqpoint_mimic_nosym.so";
  options.zero_code = {probe};
  auto probes = IterationProbes::Create(options, &sink);
  REQUIRE(probes.ok());
  auto child = ChildProcess::Start({TestProgram("plain_workload")},
                                   {"LD_PRELOAD=" + TestProgram("libseqpoint_mimic_nosym.so")});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  auto attached = (*probes)->AttachPid(child->pid());
  REQUIRE_FALSE(attached.ok());
  CHECK(attached.status().code() == ErrorCode::kNotFound);
  const std::string& msg = attached.status().message();
  CHECK(msg.find("libseqpoint_mimic_nosym.so has no symbol mimicRNNForwardTraining") !=
        std::string::npos);
  REQUIRE(child->WriteLine("go").ok());
  REQUIRE(child->Wait().ok());
}

TEST_CASE("zero-code: a configured library path that does not exist fails Create clearly") {
  CollectingSink sink;
  IterationProbesOptions options;
  ZeroCodeProbe probe = Mimic("f", 0, "g");
  probe.library = "/opt/nowhere/libMIOpen.so";
  options.zero_code = {probe};
  auto probes = IterationProbes::Create(options, &sink);
  REQUIRE_FALSE(probes.ok());
  CHECK(probes.status().code() == ErrorCode::kNotFound);
  CHECK(probes.status().message().find("/opt/nowhere/libMIOpen.so") != std::string::npos);
}

}  // namespace
}  // namespace seqpoint::probes
