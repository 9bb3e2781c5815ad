#include "common/procfs.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include "common/splitmix.h"
#include "common/testing/scratch_dir.h"

namespace seqpoint {

TEST_CASE("procfs: this process's stat, and a command name with ') ' in it") {
  auto self = ReadProcStat("/proc", "self");
  REQUIRE(self.ok());
  CHECK(self->ppid == getppid());
  CHECK(self->start_time > 0);
  testing::ScratchDir proc;
  proc.Write("42/stat",
             "42 (a) b (c) S 7 42 42 0 -1 4194560 100 0 0 0 11 22 0 0 20 0 1 0 12345 1000 10\n");
  auto odd = ReadProcStat(proc.path(), "42");
  REQUIRE(odd.ok());
  CHECK(odd->state == 'S');
  CHECK(odd->ppid == 7);
  CHECK(odd->utime == 11);
  CHECK(odd->stime == 22);
  CHECK(odd->start_time == 12345);
  proc.Write("43/stat", "43 (short) S 1 2\n");
  CHECK(ReadProcStat(proc.path(), "43").status().code() == ErrorCode::kIoError);
  CHECK(ReadProcStat(proc.path(), "44").status().code() == ErrorCode::kNotFound);
}

TEST_CASE("procfs: small files are read whole, up to a bound, and a missing one reads empty") {
  testing::ScratchDir proc;
  proc.Write("42/environ", std::string("A=1\0B=2\0", 8));
  CHECK(ProcPidDir(proc.path(), 42) == proc.path() + "/42");
  CHECK(ReadBoundedFile(ProcPidDir(proc.path(), 42) + "/environ", 1 << 20).size() == 8);
  CHECK(ReadBoundedFile(ProcPidDir(proc.path(), 42) + "/environ", 3) == "A=1");
  CHECK(ReadBoundedFile(ProcPidDir(proc.path(), 43) + "/environ", 100).empty());
  CHECK(!ReadBoundedFile("/proc/self/maps", 1 << 20).empty());  // procfs: no size, read to EOF
}

TEST_CASE("splitmix: the reference values of SplitMix64") {
  // From the reference implementation (seed 0 then the state advanced by the golden gamma).
  CHECK(SplitMix64(0) == 0xe220a8397b1dcdafULL);
  CHECK(SplitMix64(0x9e3779b97f4a7c15ULL) == 0x6e789e6aa1b965f4ULL);
}

}  // namespace seqpoint
