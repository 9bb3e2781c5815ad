#include "common/status.h"

namespace seqpoint {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "OK";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kPermissionDenied: return "permission denied";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kIoError: return "I/O error";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

}  // namespace seqpoint
