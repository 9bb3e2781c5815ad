#include "common/file_error.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace seqpoint {

std::string_view FileOpName(FileOp op) {
  switch (op) {
    case FileOp::kOpen:
      return "open";
    case FileOp::kRead:
      return "read";
    case FileOp::kList:
      return "list";
  }
  return "access";
}

Status FileErrorStatus(int err, FileOp op, std::string_view path) {
  std::string msg =
      std::string(path) + ": " + std::string(FileOpName(op)) + " failed: " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return NotFound(msg + " (the file or its device is gone)");
    case EACCES:
      return PermissionDenied(msg + " (run as root or grant read access)");
    case EPERM:
      if (op != FileOp::kRead) return PermissionDenied(msg + " (run as root)");
      return Unavailable(msg +
                         " (the driver refuses reads while the device is in reset or "
                         "suspended; retry later)");
    case EAGAIN:
    case ENODATA:
    case ENODEV:
    case ENXIO:
    case EBUSY:
    case ETIMEDOUT:
    case EOPNOTSUPP:
    case EINVAL:
      return Unavailable(msg + " (the driver has no value now; retry later)");
    default:
      return IoError(msg);
  }
}

}  // namespace seqpoint
