#include "common/file_error.h"

#include <doctest/doctest.h>

#include <cerrno>
#include <string>

namespace seqpoint {

TEST_CASE("file error: one errno mapping for every procfs/sysfs reader") {
  CHECK(FileErrorStatus(EAGAIN, FileOp::kRead, "p").code() == ErrorCode::kUnavailable);
  CHECK(FileErrorStatus(ENODATA, FileOp::kRead, "p").code() == ErrorCode::kUnavailable);
  CHECK(FileErrorStatus(ENODEV, FileOp::kRead, "p").code() == ErrorCode::kUnavailable);
  // amdgpu answers -EPERM to reads while the GPU is in reset: the driver, not permissions.
  CHECK(FileErrorStatus(EPERM, FileOp::kRead, "p").code() == ErrorCode::kUnavailable);
  CHECK(FileErrorStatus(EPERM, FileOp::kOpen, "p").code() == ErrorCode::kPermissionDenied);
  CHECK(FileErrorStatus(EPERM, FileOp::kList, "p").code() == ErrorCode::kPermissionDenied);
  CHECK(FileErrorStatus(EACCES, FileOp::kOpen, "p").code() == ErrorCode::kPermissionDenied);
  CHECK(FileErrorStatus(ENOENT, FileOp::kOpen, "p").code() == ErrorCode::kNotFound);
  CHECK(FileErrorStatus(EIO, FileOp::kRead, "p").code() == ErrorCode::kIoError);
}

TEST_CASE("file error: the message names the file, the operation and the fix") {
  const Status s = FileErrorStatus(EACCES, FileOp::kOpen, "/sys/x");
  CHECK(s.message().find("/sys/x: open failed") == 0);
  CHECK(s.message().find("root") != std::string::npos);
}

}  // namespace seqpoint
