#include "common/procfs.h"

#include <doctest/doctest.h>
#include <unistd.h>

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

}  // namespace seqpoint
