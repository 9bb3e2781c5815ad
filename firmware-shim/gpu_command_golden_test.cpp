// Golden end-to-end test of `seqpoint gpu`: the real CLI binary runs on the fixture tree built
// from the captured tables, and its JSON must equal firmware-shim/testdata/
// gpu_fixture.expected.json (the fixture's temporary path replaced by "$ROOT").
// To accept a deliberate change: SEQPOINT_UPDATE_GOLDEN=1 ctest -R firmware_shim_cli, review
// the diff of the expected file, commit it.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "firmware-shim/test_fixture.h"

namespace seqpoint::firmware {
namespace {

using nlohmann::json;

struct RunResult {
  int exit_code = -1;
  std::string out;
};

RunResult RunCli(const std::string& args) {
  const std::string cmd = std::string(SEQPOINT_CLI_PATH) + " " + args + " 2>/dev/null";
  RunResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

TEST_CASE("golden: seqpoint gpu --json on the fixture tree equals the checked-in file") {
  testing::TempDir dir;
  const int fifo_writer = testing::BuildStandardFixture(dir.path());
  const RunResult r = RunCli("gpu --sysfs-root " + dir.path() + " --json");
  if (fifo_writer >= 0) ::close(fifo_writer);
  REQUIRE(r.exit_code == 0);
  const json actual = json::parse(ReplaceAll(r.out, dir.path(), "$ROOT"));

  const std::string expected_path =
      testing::SourceDir() + "/firmware-shim/testdata/gpu_fixture.expected.json";
  const char* update = std::getenv("SEQPOINT_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(expected_path) << actual.dump(2) << "\n";
  }
  std::ifstream in(expected_path);
  REQUIRE_MESSAGE(in.good(), "missing " << expected_path);
  std::stringstream ss;
  ss << in.rdbuf();
  const json expected = json::parse(ss.str());
  const json patch = json::diff(expected, actual);
  CHECK_MESSAGE(patch.empty(), "output differs from " << expected_path << ":\n" << patch.dump(2));
}

TEST_CASE("cli: text output names every device and its decoded values") {
  testing::TempDir dir;
  const int fifo_writer = testing::BuildStandardFixture(dir.path());
  const RunResult r = RunCli("gpu --sysfs-root " + dir.path());
  if (fifo_writer >= 0) ::close(fifo_writer);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("card0  pci 0x1002:0x73bf  0000:03:00.0") != std::string::npos);
  CHECK(r.out.find("socket (avg) 33 W") != std::string::npos);
  CHECK(r.out.find("gfx 81.75 C") != std::string::npos);
  CHECK(r.out.find("fppt sppt") != std::string::npos);
  CHECK(r.out.find("unsupported") == std::string::npos);
  CHECK(r.out.find("invalid argument") != std::string::npos);  // card3's table
  CHECK(r.out.find("card0-DP-1") == std::string::npos);
}

TEST_CASE("cli: no GPU prints a note and succeeds, a missing root fails, bad usage is 2") {
  testing::TempDir dir;
  RunResult r = RunCli("gpu --sysfs-root " + dir.path());
  CHECK(r.exit_code == 0);
  CHECK(r.out == "no GPU telemetry found under " + dir.path() + "\n");
  r = RunCli("gpu --sysfs-root " + dir.path() + " --json");
  CHECK(r.exit_code == 0);
  CHECK(json::parse(r.out) == json{{"devices", json::array()}});
  r = RunCli("gpu --sysfs-root " + dir.path() + "/missing");
  CHECK(r.exit_code == 1);
  r = RunCli("gpu --no-such-option");
  CHECK(r.exit_code == 2);
  r = RunCli("gpu --help");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("--sysfs-root") != std::string::npos);
}

}  // namespace
}  // namespace seqpoint::firmware
