// The collective probes on real parts: the function table against this machine's libtorch (gloo)
// and, where installed, NCCL/RCCL (by symbol: no GPU here); arrivals of a real 2-rank PyTorch
// DDP job over gloo (bench/fleet/ddp_straggler_job.py), one or more per rank per step, each
// inside the rank's own iteration. Needs root for the attach cases; skips with the reason.
#include "probes/collectives/collective_probes.h"

#include <doctest/doctest.h>
#include <glob.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "probes/discovery/elf_file.h"
#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"

namespace seqpoint::probes {
namespace {

// The first file matching a glob in the usual library folders; empty when none.
std::string FindLibrary(const std::string& pattern) {
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu/", "/usr/lib/", "/usr/local/lib/",
                          "/opt/rocm/lib/", "/usr/local/cuda/lib64/"}) {
    glob_t g{};
    const std::string p = std::string(dir) + pattern;
    if (glob(p.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0) {
      std::string found = g.gl_pathv[0];
      globfree(&g);
      return found;
    }
    globfree(&g);
  }
  return "";
}

TEST_CASE("collective table: the gloo functions are in this machine's libtorch_cpu") {
  const std::string lib = FindLibrary("libtorch_cpu.so*");
  if (lib.empty()) {
    MESSAGE("skipped: no libtorch_cpu.so here (python3-torch / libtorch not installed)");
    return;
  }
  int gloo = 0;
  for (const CollectiveFunction& f : CollectiveFunctions()) {
    if (f.name != "gloo") continue;
    ++gloo;
    auto has = HasFunctionSymbol(lib, f.symbol);
    REQUIRE(has.ok());
    CHECK_MESSAGE(*has, (f.symbol + " not in " + lib));
  }
  CHECK(gloo == 5);
}

TEST_CASE("collective table: NCCL and RCCL functions, by symbol where the library is installed") {
  for (const char* name : {"nccl", "rccl"}) {
    const std::string lib = FindLibrary(std::string("lib") + name + ".so*");
    if (lib.empty()) {
      MESSAGE((std::string("skipped: no lib") + name +
               ".so on this machine (no GPU stack): its table entries are checked by name only"));
      int n = 0;
      for (const CollectiveFunction& f : CollectiveFunctions()) n += f.name == name;
      CHECK(n == 4);
      continue;
    }
    for (const CollectiveFunction& f : CollectiveFunctions()) {
      if (f.name != name) continue;
      auto has = HasFunctionSymbol(lib, f.symbol);
      REQUIRE(has.ok());
      CHECK_MESSAGE(*has, (f.symbol + " not in " + lib));
    }
  }
}

TEST_CASE("collective probes: a process with no collectives is told apart, not attached") {
  if (!testing::CanUseBpf()) return;
  auto probes = CollectiveProbes::Create({});
  REQUIRE_MESSAGE(probes.ok(), probes.status().ToString());
  auto none = (*probes)->AttachPid(getpid());
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("no known collective") != std::string::npos);
  CHECK_FALSE((*probes)->IsAttached(getpid()));
  CHECK_FALSE((*probes)->AttachPid(999999999).ok());  // no such process
}

TEST_CASE("collective probes: every rank of a real DDP job arrives at gloo's allreduce each step") {
  if (!testing::CanUseBpf()) return;
  if (std::system("/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null") != 0) {
    MESSAGE("skipped: python3-torch (torch.distributed) is not installed");
    return;
  }
  const char* src = std::getenv("SEQPOINT_SOURCE_DIR");
  REQUIRE(src != nullptr);
  char tmpl[] = "/tmp/collective_probes_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  constexpr int kSteps = 6;
  auto job = testing::ChildProcess::Start(
      {"/usr/bin/python3", std::string(src) + "/bench/fleet/ddp_straggler_job.py", "--ranks", "2",
       "--steps", std::to_string(kSteps), "--trace-dir", dir},
      {"PYTHONPATH=" + testing::BuildPath("sdk/python")});
  REQUIRE(job.ok());
  auto ready = job->ReadLine(240000);
  REQUIRE(ready.ok());
  std::istringstream words(*ready);
  std::string word;
  words >> word;
  REQUIRE(word == "ready");
  std::vector<int> pids;
  for (int pid; words >> pid;) pids.push_back(pid);
  REQUIRE(pids.size() == 2);
  auto probes = CollectiveProbes::Create({});
  REQUIRE_MESSAGE(probes.ok(), probes.status().ToString());
  for (int pid : pids) {
    auto n = (*probes)->AttachPid(pid);
    REQUIRE_MESSAGE(n.ok(), n.status().ToString());
    CHECK(*n == 5);  // the five gloo entries of libtorch_cpu
    auto again = (*probes)->AttachPid(pid);
    REQUIRE(again.ok());
    CHECK(*again == 0);  // idempotent
    const auto attached = (*probes)->Attached(pid);
    REQUIRE(!attached.empty());
    CHECK(attached[0].find("libtorch_cpu.so") != std::string::npos);
  }
  REQUIRE(job->WriteLine("go").ok());
  std::map<uint32_t, std::vector<uint64_t>> arrivals;
  auto rc = job->Wait(300000);
  REQUIRE(rc.ok());
  CHECK(*rc == 0);
  REQUIRE((*probes)
              ->Poll(0,
                     [&](const CollectiveArrival& a) {
                       CHECK(a.function == 0);  // ProcessGroupGloo::allreduce (DDP's buckets)
                       arrivals[a.pid].push_back(a.ts_ns);
                     })
              .ok());
  // Each rank's own trace: every step's begin..end holds at least one arrival of that rank.
  for (size_t r = 0; r < pids.size(); ++r) {
    const auto& mine = arrivals[static_cast<uint32_t>(pids[r])];
    CHECK(mine.size() >= static_cast<size_t>(kSteps));
    std::ifstream trace(dir + "/rank" + std::to_string(r) + ".csv");
    std::string line;
    std::getline(trace, line);
    int steps = 0;
    while (std::getline(trace, line)) {
      std::vector<uint64_t> f;
      std::istringstream cells(line);
      for (std::string c; std::getline(cells, c, ',');) f.push_back(std::stoull(c));
      REQUIRE(f.size() >= 6);  // iter, SL, tokens, begin, backward, end (, the job's own arrival)
      bool inside = false;
      for (uint64_t t : mine) inside = inside || (t >= f[4] && t <= f[5]);
      CHECK_MESSAGE(inside, "rank " << r << " step " << f[0] << ": no arrival in its backward");
      ++steps;
    }
    CHECK(steps == kSteps);
  }
  const CollectiveProbeStats st = (*probes)->stats();
  CHECK(st.lost == 0);
  CHECK(st.received == st.hits);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace seqpoint::probes
