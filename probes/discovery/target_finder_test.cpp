// procfs parsing, ELF reading and target choice against fixture trees (testdata/, captured from
// a real process) and the real ELF files this build produces. No root needed.
#include "probes/discovery/target_finder.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "probes/discovery/elf_file.h"
#include "probes/discovery/proc_reader.h"
#include "probes/testing/child_process.h"

namespace seqpoint::probes {
namespace {

namespace fs = std::filesystem;
using testing::BuildPath;
using testing::TestProgram;

std::string SourcePath(const std::string& relative) {
  const char* root = std::getenv("SEQPOINT_SOURCE_DIR");
  fs::path here = fs::path(__FILE__).parent_path();  // the source tree this test was built from
  return (root != nullptr ? fs::path(root) / "probes/discovery" : here).string() + "/" + relative;
}

// A temporary /proc: the captured fixture files plus real ELF files under <pid>/root.
struct FixtureProc {
  fs::path root;
  explicit FixtureProc(bool with_provider = true) {
    root = fs::temp_directory_path() / ("seqpoint-proc-" + std::to_string(getpid()));
    fs::remove_all(root);
    fs::copy(SourcePath("testdata/proc"), root, fs::copy_options::recursive);
    fs::path job = root / "32750/root/opt/job/lib";
    fs::path rocm = root / "32750/root/opt/rocm/lib";
    fs::create_directories(job);
    fs::create_directories(rocm);
    if (with_provider) {
      fs::copy_file(BuildPath("sdk/python/seqpoint_probe/libseqpoint_usdt.so"),
                    job / "libseqpoint_usdt.so");
    }
    fs::copy_file(TestProgram("libseqpoint_mimic_rnn.so"), rocm / "libMIOpen.so.1.0.50200");
  }
  ~FixtureProc() { fs::remove_all(root); }
};

TEST_CASE("proc reader: executable mappings of a captured python3 process") {
  FixtureProc proc;
  auto maps = ReadExecutableMappings(proc.root.string(), 32750);
  REQUIRE_MESSAGE(maps.ok(), maps.status().ToString());
  REQUIRE(maps->size() >= 10);
  CHECK(maps->front().path == "/usr/bin/python3.11");
  std::vector<std::string> paths;
  for (const Mapping& m : *maps) paths.push_back(m.path);
  CHECK(std::count(paths.begin(), paths.end(), "/opt/job/lib/libseqpoint_usdt.so") == 1);
  CHECK(std::count(paths.begin(), paths.end(), "/opt/rocm/lib/libMIOpen.so.1.0.50200") == 1);
  for (const Mapping& m : *maps) {
    CHECK(m.path.front() == '/');  // no [vdso]
    if (m.path == "/opt/job/lib/libseqpoint_usdt.so") {
      CHECK(m.open_path == (proc.root / "32750/root/opt/job/lib/libseqpoint_usdt.so").string());
    }
    if (m.path == "/opt/job/lib/libold plugin.so") {  // a space in the name, deleted
      CHECK(m.deleted);
      CHECK(m.open_path.find("/32750/map_files/7fd1bf300000-7fd1bf400000") != std::string::npos);
    }
  }
}

TEST_CASE("proc reader: stat with an odd comm, pid list, missing process") {
  FixtureProc proc;
  auto id = ReadProcessIdentity(proc.root.string(), 4243);
  REQUIRE(id.ok());
  CHECK(id->comm == "my (odd) job");
  CHECK(id->start_time == 987654);
  auto py = ReadProcessIdentity(proc.root.string(), 32750);
  REQUIRE(py.ok());
  CHECK(py->comm == "python3");
  auto pids = ListPids(proc.root.string());
  REQUIRE(pids.ok());
  CHECK(*pids == std::vector<int>{4243, 32750});
  auto gone = ReadProcessIdentity(proc.root.string(), 777);
  CHECK(gone.status().code() == ErrorCode::kNotFound);
  CHECK(gone.status().message().find("777") != std::string::npos);
}

TEST_CASE("elf: USDT notes, symbols, and untrusted input") {
  auto notes = ReadUsdtNotes(BuildPath("sdk/python/seqpoint_probe/libseqpoint_usdt.so"));
  REQUIRE(notes.ok());
  REQUIRE(notes->size() == 2);
  CHECK(*HasSeqpointProvider(BuildPath("sdk/python/seqpoint_probe/libseqpoint_usdt.so")));
  CHECK(*HasSeqpointProvider(TestProgram("usdt_workload_stripped")));  // notes survive strip
  CHECK_FALSE(*HasSeqpointProvider(TestProgram("plain_workload")));

  std::string mimic = TestProgram("libseqpoint_mimic_rnn.so");
  CHECK(*HasFunctionSymbol(mimic, "mimicRNNForwardTraining"));
  CHECK_FALSE(*HasFunctionSymbol(mimic, "miopenRNNForwardTraining"));
  CHECK_FALSE(
      *HasFunctionSymbol(TestProgram("libseqpoint_mimic_nosym.so"), "mimicRNNForwardTraining"));

  fs::path dir = fs::temp_directory_path() / ("seqpoint-elf-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "text") << "not an ELF file\n";
  CHECK(ReadUsdtNotes((dir / "text").string()).status().code() == ErrorCode::kInvalidArgument);
  {  // every truncation of a real library: an error or an answer, never a crash
    std::ifstream in(mimic, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t len : {size_t{16}, size_t{64}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
      std::ofstream(dir / "cut", std::ios::binary) << bytes.substr(0, len);
      (void)ReadUsdtNotes((dir / "cut").string());
      (void)HasFunctionSymbol((dir / "cut").string(), "mimicOptimizerStep");
    }
  }
  CHECK(ReadUsdtNotes((dir / "missing").string()).status().code() == ErrorCode::kNotFound);
  CHECK(ReadUsdtNotes(dir.string()).status().code() == ErrorCode::kInvalidArgument);
  fs::remove_all(dir);
}

std::vector<ZeroCodeProbe> MiopenLikeProbes() {
  ZeroCodeProbe miopen;
  miopen.name = "miopen-like";
  miopen.library = "libMIOpen.so";
  miopen.function = "mimicRNNForwardTraining";
  miopen.arg_index = 2;
  miopen.boundary_function = "mimicOptimizerStep";
  ZeroCodeProbe absent = miopen;
  absent.name = "no-such-symbol";
  absent.function = "miopenRNNForwardTraining";  // the mimic library does not define it
  ZeroCodeProbe unloaded = miopen;
  unloaded.name = "boundary-not-loaded";
  unloaded.boundary_library = "librccl.so";
  return {miopen, absent, unloaded};
}

bool AnyNote(const ProcessTargets& t, const std::string& a, const std::string& b = "") {
  for (const std::string& note : t.notes) {
    if (note.find(a) != std::string::npos && note.find(b) != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("target finder: the provider in a library wins over zero-code probes") {
  FixtureProc proc;
  TargetFinder finder(proc.root.string(), MiopenLikeProbes());
  auto targets = finder.Find(32750);
  REQUIRE_MESSAGE(targets.ok(), targets.status().ToString());
  CHECK(targets->identity.comm == "python3");
  CHECK(targets->exe == "/usr/bin/python3.11");
  REQUIRE(targets->targets.size() == 1);
  CHECK(targets->targets[0].kind == AttachTarget::Kind::kUsdt);
  CHECK(targets->targets[0].mapped_path == "/opt/job/lib/libseqpoint_usdt.so");
  CHECK(AnyNote(*targets, "zero-code probes not attached", "carries the seqpoint provider"));
  CHECK(finder.Find(4243).status().code() == ErrorCode::kNotFound);  // stat only, no maps
}

TEST_CASE("target finder: without the provider, zero-code probes, and why not") {
  FixtureProc proc(/*with_provider=*/false);
  TargetFinder finder(proc.root.string(), MiopenLikeProbes());
  auto targets = finder.Find(32750);
  REQUIRE_MESSAGE(targets.ok(), targets.status().ToString());
  REQUIRE(targets->targets.size() == 2);
  CHECK(targets->targets[0].kind == AttachTarget::Kind::kSlFunction);
  CHECK(targets->targets[0].function == "mimicRNNForwardTraining");
  CHECK(targets->targets[0].mapped_path == "/opt/rocm/lib/libMIOpen.so.1.0.50200");
  CHECK(targets->targets[1].kind == AttachTarget::Kind::kBoundaryFunction);
  CHECK(AnyNote(*targets, "has no symbol miopenRNNForwardTraining"));
  CHECK(AnyNote(*targets, "'boundary-not-loaded'", "waiting for it to be loaded"));
}

}  // namespace
}  // namespace seqpoint::probes
