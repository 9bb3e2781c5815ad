#include "agent/daemon/config_checks.h"

#include "agent/config/config_validate.h"
#include "agent/upload/upload_security.h"

namespace seqpoint::daemon {

Status CheckConfig(const DaemonConfig& config) {
  SEQPOINT_RETURN_IF_ERROR(ValidateConfig(config));
  return ValidateUploadSecurity(config);
}

Result<DaemonConfig> LoadCheckedConfig(const std::string& path, bool missing_ok) {
  auto config = LoadConfig(path, missing_ok);
  if (!config.ok()) return config.status();
  SEQPOINT_RETURN_IF_ERROR(ValidateUploadSecurity(*config).WithContext(path));
  return config;
}

}  // namespace seqpoint::daemon
