// See upload_security.h: credentials of the remote-write upload, read from files. Messages name
// the key and the file, never what the file holds.
#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "agent/upload/upload_security.h"

namespace seqpoint::daemon {
namespace {

// The secret in `path`, without trailing whitespace (files usually end with a newline).
Result<std::string> ReadSecret(const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return Unavailable(key + ": cannot read '" + path + "': " + std::strerror(err) +
                       (err == EACCES ? " (the agent runs as user seqpoint: make the file "
                                        "readable by it, and by nobody else)"
                                      : " (fix the path)"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string secret = text.str();
  while (!secret.empty() && std::strchr(" \t\r\n", secret.back()) != nullptr) secret.pop_back();
  if (secret.empty()) return InvalidArgument(key + ": '" + path + "' is empty (write the secret)");
  for (char ch : secret) {
    if (ch == '\n' || ch == '\r' || ch == '\0') {
      return InvalidArgument(key + ": '" + path +
                             "' holds more than one line (an HTTP header cannot carry it)");
    }
  }
  return secret;
}

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

}  // namespace

UploadAuthOptions UploadAuthOptions::From(const DaemonConfig& c) {
  return {c.upload_bearer_token_file, c.upload_basic_auth_user, c.upload_basic_auth_password_file};
}

Result<std::optional<std::string>> ReadAuthorization(const UploadAuthOptions& o) {
  if (!o.bearer_token_file.empty()) {
    auto token = ReadSecret("upload.bearer_token_file", o.bearer_token_file);
    if (!token.ok()) return token.status();
    return std::optional<std::string>("Bearer " + *token);
  }
  if (!o.basic_auth_user.empty()) {
    auto password = ReadSecret("upload.basic_auth_password_file", o.basic_auth_password_file);
    if (!password.ok()) return password.status();
    return std::optional<std::string>("Basic " + Base64(o.basic_auth_user + ":" + *password));
  }
  return std::optional<std::string>();
}

}  // namespace seqpoint::daemon
