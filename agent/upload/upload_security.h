// TLS and credentials of the remote-write upload (https:// endpoints such as Mimir, Thanos
// Receive, Cortex, or a hosted Prometheus), over OpenSSL through Boost.Asio's ssl::context.
//
//  - The endpoint's certificate is verified by default: against the system CA store (OpenSSL's
//    default paths: /etc/ssl/certs on Debian) plus upload.tls_ca_file, and for the host of
//    upload.url (or upload.tls_server_name), which is also sent as SNI. TLS 1.2 at least.
//    upload.tls_insecure_skip_verify turns verification off, with a warning in the log at every
//    start and reload.
//  - A client certificate (upload.tls_cert_file + upload.tls_key_file) for mutual TLS.
//  - Credentials from files, read again before every request so rotated tokens take effect
//    without a reload: upload.bearer_token_file, or upload.basic_auth_user with
//    upload.basic_auth_password_file. Their contents never reach the log, the control socket
//    or /metrics; errors name the key and the file, never the secret.
//  - Certificate files are checked for changes (inode, size, mtime) before each connection and
//    reloaded when they change (certificate rotation by cert-manager, Vault, ...).
//
// Every error names the config key and the fix. Threads: used on the daemon's io_context only.
#pragma once

#include <sys/types.h>

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "agent/config/config.h"
#include "common/status.h"

namespace boost::asio::ssl {
class context;
}

namespace seqpoint::daemon {

struct UploadTlsOptions {
  std::string ca_file;      // extra CA bundle (PEM), trusted besides the system store
  std::string cert_file;    // client certificate chain (PEM), for mutual TLS
  std::string key_file;     // its private key (PEM, unencrypted)
  std::string server_name;  // name the certificate must carry (and SNI); empty: the URL's host
  bool insecure_skip_verify = false;
  static UploadTlsOptions From(const DaemonConfig& config);
};

// What one TLS connection needs (http_post.h).
struct TlsClientConfig {
  std::shared_ptr<boost::asio::ssl::context> context;
  std::string server_name;  // verified against the certificate; sent as SNI unless an IP address
  bool verify = true;
};

class UploadTls {
 public:
  // Builds the context now: unreadable files, a key that does not match the certificate or a
  // bad PEM file are errors here. `url_host` is the host of upload.url.
  static Result<std::unique_ptr<UploadTls>> Create(UploadTlsOptions options, std::string url_host);
  // The context to connect with; rebuilt first when a certificate file changed on disk.
  Result<TlsClientConfig> Current();

 private:
  using FileIds = std::array<std::array<int64_t, 4>, 3>;  // (dev, ino, size, mtime ns) x files
  UploadTls(UploadTlsOptions options, std::string url_host)
      : options_(std::move(options)), url_host_(std::move(url_host)) {}
  FileIds Identify() const;
  UploadTlsOptions options_;
  std::string url_host_;
  TlsClientConfig current_;
  FileIds loaded_{};
};

// The Authorization header value for the next request ("Bearer ...", "Basic ..."), read from
// the configured files; nullopt when no credentials are configured.
struct UploadAuthOptions {
  std::string bearer_token_file;
  std::string basic_auth_user;
  std::string basic_auth_password_file;
  static UploadAuthOptions From(const DaemonConfig& config);
  bool any() const { return !bearer_token_file.empty() || !basic_auth_user.empty(); }
};
Result<std::optional<std::string>> ReadAuthorization(const UploadAuthOptions& options);

// Checks the [upload] TLS and credential keys: their combinations (https for tls_* keys, cert
// with key, one kind of credentials), absolute paths, and (when upload.url is set) that every
// file can be read and parsed, so `seqpointd --check-config` and a reload catch them.
Status ValidateUploadSecurity(const DaemonConfig& config);
// Whether a reload changed any of those keys (the uploader is then rebuilt).
bool UploadSecurityChanged(const DaemonConfig& a, const DaemonConfig& b);

// Hint appended to a TLS failure: which key to change. `reason` is OpenSSL's reason string;
// `verify_result` is SSL_get_verify_result() of the connection (X509_V_OK = 0 when none).
std::string ExplainTlsFailure(const std::string& reason, long verify_result,
                              const std::string& server_name, bool have_client_cert);

}  // namespace seqpoint::daemon
