// Which GPUs a process uses, on fixtures of real nodes: NVIDIA through the NVML double in node
// mode (nvml/testdata/fake_nvml.c reading GPUs and processes from real `nvidia-smi -q -x`),
// AMD through KFD sysfs trees written from real topology properties. Faults: a GPU lost, a
// process on two GPUs, a container process (host pid), CUDA_VISIBLE_DEVICES by UUID or
// reordered, MIG, a process not on a GPU yet, an NVML without the _v3 entry point.
#include "collectors/gpu/gpu_process_map.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include "collectors/collectors_test_util.h"
#include "collectors/nvml/nvml_collector.h"
#include "common/clock.h"

namespace seqpoint::collectors {
namespace {

const std::string kNode = std::string(SEQPOINT_GPU_TESTDATA) + "/node5.nvidia-smi.xml";
// The fixture's GPUs in NVML order (see node5.nvidia-smi.xml).
const char* const kT4 = "GPU-d37e67a5-91dd-3774-a5cb-99096249601a";
const char* const kRtx3080 = "GPU-19d6d965-2acc-f646-00f8-4c76979aabb4";
const char* const kA100 = "GPU-513536b6-7d19-9063-b049-1e69664bb298";
const char* const kAda = "GPU-37037c3f-65c8-ec4d-24a9-420204ad8026";
const char* const kBlackwell = "GPU-12345678-aaaa-bbbb-cccc-0123456789ab";
constexpr uint64_t kMiB = 1024ull * 1024ull;

struct NodeEnv {
  explicit NodeEnv(const char* extra = nullptr, const char* lost = nullptr) {
    setenv("FAKE_NVML_XML", kNode.c_str(), 1);
    if (extra) setenv("FAKE_NVML_EXTRA", extra, 1);
    if (lost) setenv("FAKE_NVML_LOST", lost, 1);
  }
  ~NodeEnv() {
    unsetenv("FAKE_NVML_XML");
    unsetenv("FAKE_NVML_EXTRA");
    unsetenv("FAKE_NVML_LOST");
  }
};

std::unique_ptr<NvmlLibrary> Node(const char* path = SEQPOINT_FAKE_NVML_PATH) {
  auto lib = NvmlLibrary::Load(path);
  REQUIRE_MESSAGE(lib.ok(), lib.status().ToString());
  return std::move(lib).value();
}

}  // namespace

TEST_CASE("gpu map: the node fixture's GPUs, by UUID and PCI bus id") {
  NodeEnv env;
  auto nvml = Node();
  REQUIRE(nvml->devices().size() == 5);
  CHECK(nvml->devices()[0].uuid == kT4);
  CHECK(nvml->devices()[0].pci == "0000:00:1e.0");
  CHECK(nvml->devices()[4].name == "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition");
  // Selecting by UUID finds the GPU wherever NVML enumerates it.
  auto sel = nvml->Select(kAda);
  REQUIRE(sel.ok());
  CHECK(sel->at(0).index == 3);
}

TEST_CASE("gpu map: a real compute process is found on its own GPU only") {
  NodeEnv env;
  auto nvml = Node();
  // T4's python (pid 5762, 1005 MiB, type C); Xorg (675, type G) is no compute process.
  auto gpus = NvidiaGpusOf(*nvml, 5762);
  REQUIRE(gpus.ok());
  REQUIRE(gpus->size() == 1);
  CHECK((*gpus)[0].uuid == kT4);
  CHECK((*gpus)[0].id() == kT4);
  CHECK((*gpus)[0].used_bytes == 1005 * kMiB);
  CHECK_FALSE((*gpus)[0].mig());
  CHECK(NvidiaGpusOf(*nvml, 675)->empty());
  // The Blackwell's llama-server: minor number 0 like the T4's, told apart by UUID.
  auto b = NvidiaGpusOf(*nvml, 116860);
  REQUIRE(b->size() == 1);
  CHECK((*b)[0].uuid == kBlackwell);
  CHECK((*b)[0].used_bytes == 65710 * kMiB);
}

TEST_CASE("gpu map: a process not on a GPU yet gets none, and is looked up again later") {
  NodeEnv env;
  auto nvml = Node();
  CHECK(NvidiaGpusOf(*nvml, 4242)->empty());
  GpuRecheck recheck(1'000'000'000);
  CHECK(recheck.Due(10));
  CHECK_FALSE(recheck.Due(500'000'000));
  CHECK(recheck.Due(1'000'000'010));
}

TEST_CASE("gpu map: a process on two GPUs, and one in a MIG instance") {
  // Added to the real fixture: pid 7001 holds contexts on the 3080 and the Ada (a stray
  // context on a second GPU); pid 7002 runs in MIG GPU instance 4 / compute instance 0 of the
  // A100 (a real MIG layout of the fixture).
  NodeEnv env("1:7001:300;3:7001:4200;2:7002:9800:4:0");
  auto nvml = Node();
  auto two = NvidiaGpusOf(*nvml, 7001);
  REQUIRE(two->size() == 2);
  CHECK((*two)[0].uuid == kRtx3080);
  CHECK((*two)[1].uuid == kAda);
  CHECK((*two)[1].used_bytes == 4200 * kMiB);
  auto mig = NvidiaGpusOf(*nvml, 7002);
  REQUIRE(mig->size() == 1);
  CHECK((*mig)[0].mig());
  CHECK((*mig)[0].gpu_instance == 4);
  CHECK((*mig)[0].compute_instance == 0);
  CHECK((*mig)[0].id() == std::string(kA100) + "/gi4/ci0");
}

TEST_CASE("gpu map: a container process is found by its host pid, never its namespace pid") {
  // NVML lists host pids (the driver is not pid-namespace aware); a containerised trainer that
  // is pid 7 inside its namespace is 48213 on the host, where the probes see it too.
  NodeEnv env("4:48213:2048");
  auto nvml = Node();
  CHECK(NvidiaGpusOf(*nvml, 48213)->size() == 1);
  CHECK(NvidiaGpusOf(*nvml, 7)->empty());
}

TEST_CASE("gpu map: CUDA_VISIBLE_DEVICES by UUID or reordered changes nothing") {
  // Slurm gave the rank CUDA_VISIBLE_DEVICES=<Ada UUID>,<T4 UUID>: inside it, cuda:0 is the
  // Ada (NVML index 3, minor 0). The mapping reads NVML, so the rank is on the Ada whatever
  // its ordinals say.
  NodeEnv env("3:9100:1500");
  auto visible = ParseVisibleDevices(std::string(kAda) + ", " + kT4);
  REQUIRE(visible.size() == 2);
  CHECK(visible[0] == kAda);
  auto nvml = Node();
  auto gpus = NvidiaGpusOf(*nvml, 9100);
  REQUIRE(gpus->size() == 1);
  CHECK((*gpus)[0].uuid == visible[0]);
  CHECK((*gpus)[0].nvml_index == 3);  // not 0, the rank's CUDA ordinal
  CHECK(ParseVisibleDevices("").empty());
  CHECK(ParseVisibleDevices("2,0") == std::vector<std::string>{"2", "0"});
}

TEST_CASE("gpu map: a lost GPU is skipped and named, the process on its other GPU still found") {
  NodeEnv env("1:7001:300;3:7001:4200", "1");
  auto nvml = Node();
  std::string warnings;
  auto gpus = NvidiaGpusOf(*nvml, 7001, &warnings);
  REQUIRE(gpus.ok());
  REQUIRE(gpus->size() == 1);
  CHECK((*gpus)[0].uuid == kAda);
  CHECK(warnings.find("GPU is lost") != std::string::npos);
}

TEST_CASE("gpu map: an NVML without nvmlDeviceGetComputeRunningProcesses_v3 says so") {
  NodeEnv env;
  auto nvml = Node(SEQPOINT_FAKE_NVML_OLD_PATH);
  auto gpus = NvidiaGpusOf(*nvml, 5762);
  REQUIRE_FALSE(gpus.ok());
  CHECK(gpus.status().code() == ErrorCode::kUnsupported);
  CHECK(gpus.status().message().find("lacks nvmlDeviceGetComputeRunningProcesses_v3") !=
        std::string::npos);
}

TEST_CASE("nvml collector: a process's own GPU, UUID on every sample, re-checked until on one") {
  NodeEnv env("3:9100:1500");
  FakeClock clock;
  NvmlOptions o;
  o.library = SEQPOINT_FAKE_NVML_PATH;
  NvmlCollector nvml(o);
  // Not on any GPU: opened, but never measured on every GPU.
  REQUIRE(nvml.Open({4242, ""}).ok());
  CHECK(nvml.Describe().find("no GPU yet") != std::string::npos);
  REQUIRE(nvml.Begin().ok());
  auto none = nvml.End();
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("no CUDA context on any NVIDIA GPU yet") != std::string::npos);
  nvml.Close();
  // On the Ada.
  REQUIRE(nvml.Open({9100, ""}).ok());
  REQUIRE(nvml.Begin().ok());
  auto r = nvml.End();
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  bool saw_proc_mem = false;
  for (const Sample& s : *r) {
    INFO(s.name);
    CHECK(s.name.starts_with("nvml:gpu3:"));
    if (s.name == "nvml:gpu3:proc_mem_used") {
      saw_proc_mem = true;
      CHECK(s.scope == SampleScope::kProcess);
      CHECK(s.kind == SampleKind::kGauge);
      CHECK(s.value == 1500.0 * kMiB);
    } else {
      CHECK(s.scope == SampleScope::kDevice);
      CHECK(s.device == kAda);
      CHECK(s.kind == (s.name == "nvml:gpu3:energy" ? SampleKind::kDelta : SampleKind::kGauge));
    }
  }
  CHECK(saw_proc_mem);
}

// --- AMD: KFD trees. Node properties are those of real KFD nodes published as test fixtures
// (an MI100, "arcturus", gpu_id 42700: location_id 8960 = 0000:23:00.0, unique_id
// 7809984429061111111; a gfx1201 node: location_id 33792 = 0000:84:00.0), render minors 128 and
// 129, and a CPU node (gpu_id 0). proc/<pid>/vram_<gpu_id> as kfd_process.c creates it.
namespace {
void WriteKfdNode(const seqpoint::testing::ScratchDir& d, int node, const std::string& gpu_id,
                  const std::string& name, const std::string& properties) {
  const std::string base = "class/kfd/kfd/topology/nodes/" + std::to_string(node);
  d.Write(base + "/gpu_id", gpu_id + "\n");
  d.Write(base + "/name", name + "\n");
  d.Write(base + "/properties", properties);
}

void WriteKfdNodeTree(const seqpoint::testing::ScratchDir& d) {
  WriteKfdNode(d, 0, "0", "", "cpu_cores_count 192\nsimd_count 0\nlocation_id 0\ndomain 0\n");
  WriteKfdNode(d, 1, "42700", "arcturus",
               "cpu_cores_count 0\nsimd_count 480\nmem_banks_count 1\ngfx_target_version 90008\n"
               "vendor_id 4098\ndevice_id 29580\nlocation_id 8960\ndomain 0\n"
               "drm_render_minor 128\nhive_id 0\nnum_xcc 1\nunique_id 7809984429061111111\n");
  WriteKfdNode(d, 2, "56387", "gfx1201",
               "cpu_cores_count 0\nsimd_count 128\ngfx_target_version 120001\nvendor_id 4098\n"
               "location_id 33792\ndomain 0\ndrm_render_minor 129\nhive_id 0\n");
}
}  // namespace

TEST_CASE("gpu map AMD: KFD proc entries to gpu_id, render minor, PCI and UUID") {
  seqpoint::testing::ScratchDir sys;
  WriteKfdNodeTree(sys);
  sys.Write("class/kfd/kfd/proc/3141/pasid", "32770\n");
  sys.Write("class/kfd/kfd/proc/3141/vram_42700", "8589934592\n");
  sys.Write("class/kfd/kfd/proc/3141/sdma_42700", "0\n");
  // A process on both GPUs.
  sys.Write("class/kfd/kfd/proc/2718/vram_42700", "1048576\n");
  sys.Write("class/kfd/kfd/proc/2718/vram_56387", "4194304\n");
  auto one = AmdGpusOf(sys.path(), 3141);
  REQUIRE_MESSAGE(one.ok(), one.status().ToString());
  REQUIRE(one->size() == 1);
  CHECK((*one)[0].vendor == "amd");
  CHECK((*one)[0].kfd_gpu_id == 42700);
  CHECK((*one)[0].render_minor == 128);
  CHECK((*one)[0].pci == "0000:23:00.0");
  CHECK((*one)[0].uuid == "GPU-6c62a3758b84fd47");  // 7809984429061111111 in hex
  CHECK((*one)[0].name == "arcturus");
  CHECK((*one)[0].used_bytes == 8589934592ull);
  auto two = AmdGpusOf(sys.path(), 2718);
  REQUIRE(two->size() == 2);
  CHECK((*two)[1].pci == "0000:84:00.0");
  CHECK((*two)[1].render_minor == 129);
  CHECK((*two)[1].uuid.empty());
  CHECK((*two)[1].id() == "0000:84:00.0");
  // Not on a GPU (yet): empty, not an error.
  CHECK(AmdGpusOf(sys.path(), 99)->empty());
}

TEST_CASE("gpu map AMD: no KFD is absent, a gpu_id the topology lacks is a clear error") {
  seqpoint::testing::ScratchDir empty;
  auto none = AmdGpusOf(empty.path(), 1);
  CHECK(none.status().code() == ErrorCode::kNotFound);
  CHECK(none.status().message().find("no AMD KFD") != std::string::npos);
  seqpoint::testing::ScratchDir sys;
  WriteKfdNodeTree(sys);
  sys.Write("class/kfd/kfd/proc/5/vram_777", "1\n");
  auto bad = AmdGpusOf(sys.path(), 5);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("gpu_id 777") != std::string::npos);
}

}  // namespace seqpoint::collectors

#include "collectors/gpu/memory_fit.h"

namespace seqpoint::collectors {

TEST_CASE("memory fit: the SL at which the job would exceed its GPU's memory") {
  const double GiB = 1024.0 * 1024.0 * 1024.0;
  // Peaks of an RNN job: 2 GiB of weights and optimizer state + 40 MiB per SL step.
  std::vector<MemoryPoint> bins;
  for (double sl : {32.0, 64.0, 128.0, 256.0}) bins.push_back({sl, 2 * GiB + sl * 40 * 1048576.0});
  MemoryFit fit = FitMemory(bins, 80 * GiB);
  REQUIRE(fit.supported);
  CHECK(fit.r2 == doctest::Approx(1.0));
  REQUIRE(fit.exceed_sl.has_value());
  CHECK(*fit.exceed_sl == doctest::Approx((78.0 * 1024.0) / 40.0));  // 1996.8
  CHECK(fit.extrapolated);                                           // far beyond 2 x 256
  CHECK(FitMemory(bins, 12 * GiB).extrapolated == false);            // 256 < 2 x 256
  // Not carried by the data: too few bins, flat, quadratic-looking noise.
  CHECK_FALSE(FitMemory({{32, GiB}, {64, 2 * GiB}}, 80 * GiB).supported);
  CHECK_FALSE(FitMemory({{32, GiB}, {64, GiB}, {128, GiB}}, 80 * GiB).supported);
  MemoryFit noisy =
      FitMemory({{32, GiB}, {64, 6 * GiB}, {128, 1.5 * GiB}, {256, 7 * GiB}}, 80 * GiB);
  CHECK_FALSE(noisy.supported);
  CHECK(noisy.why.find("not linear") != std::string::npos);
}

}  // namespace seqpoint::collectors
