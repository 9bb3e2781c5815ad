#include "collectors/file_root.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "collectors/collectors_test_util.h"

namespace seqpoint::collectors {

TEST_CASE("file root: sysfs-style values, NUL padding, errors that name the file") {
  testing::ScratchDir dir;
  dir.Write("class/x/energy_uj", "123456789\n");
  dir.Write("class/x/padded", std::string("3\n") + std::string(100, '\0'));
  dir.Write("class/x/hex", "0x1002\n");
  dir.Write("class/x/garbage", "12ab\n");
  FileRoot root(dir.path());
  CHECK(*root.ReadUint64("class/x/energy_uj") == 123456789u);
  CHECK(*root.ReadUint64("/class/x/padded") == 3u);
  CHECK(*root.ReadUint64("class/x/hex") == 0x1002u);
  auto g = root.ReadUint64("class/x/garbage");
  CHECK(g.status().code() == ErrorCode::kIoError);
  CHECK(g.status().message().find("class/x/garbage") != std::string::npos);
  auto missing = root.ReadString("class/x/none");
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  CHECK(missing.status().message().find(dir.path() + "/class/x/none") != std::string::npos);
  auto names = root.ListDir("class/x");
  REQUIRE(names.ok());
  CHECK(names->size() == 4);
  CHECK(root.Exists("class/x/hex"));
  CHECK(!root.Exists("class/y"));
}

TEST_CASE("file root: permission denied says to run as root") {
  if (geteuid() == 0) {
    MESSAGE("skipped: root reads any file, so EACCES cannot be produced here");
    return;
  }
  testing::ScratchDir dir;
  dir.Write("secret", "1\n");
  ::chmod((dir.path() + "/secret").c_str(), 0);
  auto r = FileRoot(dir.path()).ReadString("secret");
  CHECK(r.status().code() == ErrorCode::kPermissionDenied);
}

}  // namespace seqpoint::collectors
