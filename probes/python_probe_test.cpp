// The Python module (sdk/python/seqpoint_probe) in a real PyTorch training loop, run by Debian's
// /usr/bin/python3 with python3-torch, traced by real USDT probes.
#include <doctest/doctest.h>

#include "probes/iteration_probes.h"
#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"

namespace seqpoint::probes {
namespace {

using testing::ChildProcess;
using testing::CollectingSink;
using testing::PollUntil;

// A small LSTM trained on batches of varying sequence length; one line per iteration marks it.
constexpr const char* kTrainer = R"PY(
import sys
import torch
import seqpoint_probe
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.LSTM(input_size=8, hidden_size=16, batch_first=True)
head = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(list(model.parameters()) + list(head.parameters()), lr=0.01)
print("ready", flush=True)
sys.stdin.readline()
for step, seq_len in enumerate([5, 9, 13, 5, 21, 9, 30, 5]):
    x = torch.randn(4, seq_len, 8)
    with seqpoint_probe.iteration(seq_len=seq_len, batch=4, tokens=4 * seq_len):
        out, _ = model(x)
        loss = head(out[:, -1]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
print("done", flush=True)
)PY";

TEST_CASE("python: a real PyTorch loop marked with seqpoint_probe.iteration is traced") {
  if (!testing::CanUseBpf()) return;
  CollectingSink sink;
  auto probes = IterationProbes::Create({}, &sink);
  REQUIRE_MESSAGE(probes.ok(), probes.status().ToString());
  auto child = ChildProcess::Start({"/usr/bin/python3", "-c", kTrainer},
                                   {"PYTHONPATH=" + testing::BuildPath("sdk/python"),
                                    "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"});
  REQUIRE(child.ok());
  auto ready = child->ReadLine(120000);  // importing torch takes seconds on a small VM
  REQUIRE(ready.ok());
  REQUIRE(*ready == "ready");
  auto attached = (*probes)->AttachPid(child->pid());
  REQUIRE_MESSAGE(attached.ok(), attached.status().ToString());
  CHECK((*probes)->Describe(child->pid()).find("libseqpoint_usdt.so") != std::string::npos);
  REQUIRE(child->WriteLine("go").ok());
  REQUIRE(PollUntil([&] { REQUIRE((*probes)->Poll(50).ok()); },
                    [&] { return sink.EndsOf(child->pid()).size() >= 8; }, 120000));
  REQUIRE(child->Wait().ok());
  auto ends = sink.EndsOf(child->pid());
  REQUIRE(ends.size() == 8);
  const uint32_t sls[] = {5, 9, 13, 5, 21, 9, 30, 5};
  for (size_t i = 0; i < ends.size(); ++i) {
    CHECK(ends[i].complete());
    CHECK(ends[i].iter == i);
    CHECK(ends[i].seq_len == sls[i]);
    CHECK(ends[i].tokens == 4u * sls[i]);
  }
}

}  // namespace
}  // namespace seqpoint::probes
