// The one mapping from an errno of a file operation to the project's Status, used by every
// procfs/sysfs reader (collectors' FileRoot, the firmware shim, the probes' /proc readers):
//  - the file (or its device) is gone: ENOENT/ENOTDIR -> NotFound;
//  - the driver cannot answer now: EAGAIN, ENODATA, ENODEV, ENXIO, EBUSY, ETIMEDOUT,
//    EOPNOTSUPP, EINVAL, and EPERM from a read (amdgpu_pm.c returns -EPERM from hwmon and
//    gpu_metrics reads while the GPU is in reset or runtime-suspended; permissions are checked
//    at open, never at read) -> Unavailable;
//  - EACCES, or EPERM from open/list -> PermissionDenied;
//  - anything else (EIO...) -> IoError.
// The message is "<path>: <op> failed: <strerror> (<what to do>)".
#pragma once

#include <string_view>

#include "common/status.h"

namespace seqpoint {

enum class FileOp { kOpen, kRead, kList };

std::string_view FileOpName(FileOp op);

Status FileErrorStatus(int err, FileOp op, std::string_view path);

}  // namespace seqpoint
