// See upload_security.h: the TLS context of the uploader, its checks and error explanations.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <sys/stat.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "agent/config/config_validate.h"
#include "agent/upload/upload_security.h"

namespace seqpoint::daemon {
namespace ssl = boost::asio::ssl;
namespace {

// The agent runs as user `seqpoint` under systemd: say so when a file is not readable.
Status CheckReadable(const std::string& key, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    return InvalidArgument(key + ": cannot read '" + path + "': " + std::strerror(err) +
                           (err == EACCES ? " (the agent runs as user seqpoint: make the file "
                                            "readable by it, e.g. chgrp seqpoint + chmod 640)"
                                          : " (fix the path)"));
  }
  std::fclose(f);
  return Status::Ok();
}

// `ec` (Asio took the first OpenSSL error) and what remains of OpenSSL's error queue, as one
// line ("no certificate or crl found; ..."). Empties the queue.
std::string OpenSslErrors(const boost::system::error_code& ec) {
  std::string out = ec ? ec.message() : "";
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    if (reason == nullptr || out.find(reason) != std::string::npos) continue;
    out += (out.empty() ? "" : "; ") + std::string(reason);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

// Refuses to prompt on a terminal for a key's passphrase: a daemon has none.
int NoPassphrase(char*, int, int, void*) { return -1; }

Result<std::shared_ptr<ssl::context>> BuildContext(const UploadTlsOptions& o) {
  ERR_clear_error();
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX* native = ctx->native_handle();
  // TLS 1.2 and 1.3 only: older versions are deprecated (RFC 8996).
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_default_passwd_cb(native, &NoPassphrase);
  boost::system::error_code ec;
  if (o.insecure_skip_verify) {
    ctx->set_verify_mode(ssl::verify_none, ec);
  } else {
    ctx->set_verify_mode(ssl::verify_peer, ec);
    ctx->set_default_verify_paths(ec);  // the system store; SSL_CERT_FILE/SSL_CERT_DIR override
    if (ec) {
      return Unavailable("cannot load the system CA store (/etc/ssl/certs): " + OpenSslErrors(ec) +
                         " (install ca-certificates, or set upload.tls_ca_file)");
    }
  }
  if (!o.ca_file.empty()) {
    SEQPOINT_RETURN_IF_ERROR(CheckReadable("upload.tls_ca_file", o.ca_file));
    ctx->load_verify_file(o.ca_file, ec);
    if (ec) {
      return InvalidArgument("upload.tls_ca_file: '" + o.ca_file +
                             "' is not a PEM file of CA certificates: " + OpenSslErrors(ec));
    }
  }
  if (!o.cert_file.empty()) {
    SEQPOINT_RETURN_IF_ERROR(CheckReadable("upload.tls_cert_file", o.cert_file));
    SEQPOINT_RETURN_IF_ERROR(CheckReadable("upload.tls_key_file", o.key_file));
    ctx->use_certificate_chain_file(o.cert_file, ec);
    if (ec) {
      return InvalidArgument("upload.tls_cert_file: '" + o.cert_file +
                             "' is not a PEM certificate (chain): " + OpenSslErrors(ec));
    }
    ctx->use_private_key_file(o.key_file, ssl::context::pem, ec);
    if (ec) {
      std::string why = OpenSslErrors(ec);
      if (why.find("passphrase") != std::string::npos ||
          why.find("bad password") != std::string::npos) {
        ERR_clear_error();
        return InvalidArgument("upload.tls_key_file: '" + o.key_file +
                               "' is encrypted, and the agent has nobody to ask for its "
                               "passphrase (store it unencrypted, readable by the agent only: "
                               "`openssl pkey -in KEY -out KEY.plain`)");
      }
      std::string fix = why.find("values mismatch") != std::string::npos
                            ? "it is not the key of upload.tls_cert_file: name the matching pair"
                            : "it must be an unencrypted PEM private key (decrypt it with "
                              "`openssl pkey -in KEY -out KEY.plain`)";
      return InvalidArgument("upload.tls_key_file: '" + o.key_file + "': " + why + " (" + fix +
                             ")");
    }
    if (SSL_CTX_check_private_key(native) != 1) {
      return InvalidArgument("upload.tls_key_file: '" + o.key_file +
                             "' does not match the certificate in upload.tls_cert_file '" +
                             o.cert_file + "' (name the matching pair)");
    }
  }
  return ctx;
}

std::array<int64_t, 4> FileId(const std::string& path) {
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0) return {0, 0, 0, 0};
  return {static_cast<int64_t>(st.st_dev), static_cast<int64_t>(st.st_ino),
          static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

}  // namespace

UploadTlsOptions UploadTlsOptions::From(const DaemonConfig& c) {
  return {c.upload_tls_ca_file, c.upload_tls_cert_file, c.upload_tls_key_file,
          c.upload_tls_server_name, c.upload_tls_insecure_skip_verify};
}

Result<std::unique_ptr<UploadTls>> UploadTls::Create(UploadTlsOptions options,
                                                     std::string url_host) {
  std::unique_ptr<UploadTls> self(new UploadTls(std::move(options), std::move(url_host)));
  auto built = self->Current();
  if (!built.ok()) return built.status();
  return self;
}

UploadTls::FileIds UploadTls::Identify() const {
  return {FileId(options_.ca_file), FileId(options_.cert_file), FileId(options_.key_file)};
}

Result<TlsClientConfig> UploadTls::Current() {
  FileIds now = Identify();
  if (current_.context == nullptr || now != loaded_) {
    auto ctx = BuildContext(options_);
    if (!ctx.ok()) return ctx.status();
    current_.context = std::move(*ctx);
    current_.server_name = options_.server_name.empty() ? url_host_ : options_.server_name;
    current_.verify = !options_.insecure_skip_verify;
    loaded_ = now;
  }
  return current_;
}

std::string ExplainTlsFailure(const std::string& reason, long verify_result,
                              const std::string& server_name, bool have_client_cert) {
  switch (verify_result) {
    case X509_V_OK:
      break;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return "the endpoint's certificate is not for '" + server_name +
             "': use a host name it carries in upload.url, or set upload.tls_server_name";
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return "check the endpoint's certificate dates and this node's clock";
    default:
      return "the endpoint's certificate is not signed by a CA this node trusts: add the CA to "
             "upload.tls_ca_file (PEM)";
  }
  if (reason.find("certificate required") != std::string::npos ||
      reason.find("bad certificate") != std::string::npos ||
      reason.find("handshake failure") != std::string::npos) {
    return have_client_cert ? "the endpoint refused the client certificate: check "
                              "upload.tls_cert_file against the CA it trusts"
                            : "the endpoint may require a client certificate: set "
                              "upload.tls_cert_file and upload.tls_key_file";
  }
  if (reason.find("unknown ca") != std::string::npos) {
    return "the endpoint does not trust the CA of upload.tls_cert_file";
  }
  if (reason.find("wrong version number") != std::string::npos ||
      reason.find("packet length too long") != std::string::npos) {
    return "the endpoint does not speak TLS on this port: use http:// in upload.url, or the "
           "right port";
  }
  return "";
}

bool UploadSecurityChanged(const DaemonConfig& a, const DaemonConfig& b) {
  auto fields = [](const DaemonConfig& c) {
    return std::tie(c.upload_tls_ca_file, c.upload_tls_cert_file, c.upload_tls_key_file,
                    c.upload_tls_server_name, c.upload_tls_insecure_skip_verify,
                    c.upload_bearer_token_file, c.upload_basic_auth_user,
                    c.upload_basic_auth_password_file);
  };
  return fields(a) != fields(b);
}

Status ValidateUploadSecurity(const DaemonConfig& c) {
  const std::pair<const std::string*, const char*> files[] = {
      {&c.upload_tls_ca_file, "upload.tls_ca_file"},
      {&c.upload_tls_cert_file, "upload.tls_cert_file"},
      {&c.upload_tls_key_file, "upload.tls_key_file"},
      {&c.upload_bearer_token_file, "upload.bearer_token_file"},
      {&c.upload_basic_auth_password_file, "upload.basic_auth_password_file"}};
  for (const auto& [path, key] : files) {
    if (!path->empty() && path->front() != '/') {
      return InvalidArgument(std::string(key) + " must be an absolute path, got '" + *path + "'");
    }
  }
  if (c.upload_tls_cert_file.empty() != c.upload_tls_key_file.empty()) {
    return InvalidArgument(
        "upload.tls_cert_file and upload.tls_key_file go together (a client certificate and its "
        "key): set both, or neither");
  }
  if (!c.upload_bearer_token_file.empty() && !c.upload_basic_auth_user.empty()) {
    return InvalidArgument(
        "upload.bearer_token_file and upload.basic_auth_user both set: an endpoint takes one "
        "kind of credentials; remove one");
  }
  if (c.upload_basic_auth_user.empty() != c.upload_basic_auth_password_file.empty()) {
    return InvalidArgument(
        "upload.basic_auth_user and upload.basic_auth_password_file go together: set both, or "
        "neither");
  }
  if (c.upload_basic_auth_user.find(':') != std::string::npos) {
    return InvalidArgument("upload.basic_auth_user must not contain ':' (RFC 7617)");
  }
  const bool any_tls = !c.upload_tls_ca_file.empty() || !c.upload_tls_cert_file.empty() ||
                       !c.upload_tls_server_name.empty() || c.upload_tls_insecure_skip_verify;
  if (c.upload_url.empty()) return Status::Ok();  // nothing is uploaded: files are not read
  auto url = ParseHttpUrl(c.upload_url);
  if (!url.ok()) return Status::Ok();  // reported as upload.url by ValidateConfig
  if (any_tls && !url->tls) {
    return InvalidArgument(
        "upload.tls_* keys are set but upload.url is http://: use https:// (or remove them)");
  }
  if (url->tls) {
    auto tls = UploadTls::Create(UploadTlsOptions::From(c), url->host);
    if (!tls.ok()) return tls.status();
  }
  auto auth = ReadAuthorization(UploadAuthOptions::From(c));
  return auth.ok() ? Status::Ok() : auth.status();
}

}  // namespace seqpoint::daemon
