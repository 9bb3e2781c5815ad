// Remote-write over https:// against a real Prometheus 2.42 behind --web.config.file (its own
// TLS server: tls_server_config, client_auth_type, basic_auth_users), with certificates made by
// the openssl CLI for each test; samples read back through the query API over https. Also the
// failures an operator meets: a wrong CA (spool kept, then fixed by a reload), a name the
// certificate does not carry, a missing client certificate, a wrong password; and the config
// checks that name the key and the fix.
#include <doctest/doctest.h>

#include <cstdio>

#include "agent/testing/prometheus_server.h"
#include "agent/upload/remote_write_encode.h"
#include "agent/testing/seqpointd_process.h"
#include "agent/testing/test_harness.h"
#include "agent/testing/tls_test_util.h"
#include "agent/upload/upload_security.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

bool HaveTools(const TestPki& pki) {
  if (!HavePrometheus()) {
    MESSAGE("skipped: prometheus not installed (scripts/setup.sh installs it)");
    return false;
  }
  REQUIRE_MESSAGE(pki.error.empty(), pki.error);
  return true;
}

std::string TlsWebConfig(const TestPki& pki, bool require_client_cert) {
  std::string yml = "tls_server_config:\n  cert_file: " + pki.server_crt +
                    "\n  key_file: " + pki.server_key + "\n";
  if (require_client_cert) {
    yml += "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: " + pki.ca_crt + "\n";
  }
  return yml;
}

WebClient Trusting(const TestPki& pki, bool with_client_cert) {
  WebClient c;
  c.tls = true;
  c.ca_file = pki.ca_crt;
  if (with_client_cert) {
    c.cert_file = pki.client_crt;
    c.key_file = pki.client_key;
  }
  return c;
}

// The "upload" object of `seqpoint status`, or null.
json UploadStatus(const json& status) {
  return status.is_object() && status["upload"].is_object() ? status["upload"] : json();
}
json UploadStatus(const DaemonHarness& h) {
  ControlRequest r;
  r.cmd = "status";
  auto status = h.Request(r);
  return status.ok() ? UploadStatus(*status) : json();
}

// Every projection `show` reports for the run is in Prometheus with the same final value.
void CheckEveryProjectionArrived(PrometheusServer& prom, const json& show) {
  const std::string run = std::to_string(show["run"]["id"].get<int64_t>());
  REQUIRE(!show["projections"].empty());
  for (const auto& [metric, p] : show["projections"].items()) {
    BaseUnit b = ToBaseUnit(metric, p["unit"].get<std::string>());
    std::string q = "seqpoint_run_projection{run=\"" + run + "\",metric=\"" + b.name + "\"}";
    json result = prom.Query(q);
    INFO(q);
    REQUIRE(result.size() == 1);
    double got = std::stod(result[0]["value"][1].get<std::string>());
    CHECK(got == doctest::Approx(p["total"].get<double>() * b.scale).epsilon(1e-9));
  }
}

// Runs the recorded trace as run job-0 through an in-process daemon uploading with `cfg`, and
// waits until the spool is empty.
void UploadAndDrain(DaemonHarness& h, const DaemonConfig& cfg) {
  ReplaySpec spec;
  spec.step_delay_us = 20000;
  REQUIRE(h.Start(cfg, ReplayParts(1, spec)).ok());
  REQUIRE(WaitFor([&] {
    auto runs = h.Runs(true);
    return runs.ok() && !(*runs)["runs"].empty() && (*runs)["runs"][0]["state"] == "finished";
  }));
  REQUIRE(WaitFor([&] {
    json u = UploadStatus(h);
    return u.is_object() && u["spool_batches"] == 0 && u["sent_batches"] > 0;
  }));
}

// Waits until the uploader has failed and returns its status.
json WaitForUploadFailure(const std::function<json()>& status) {
  json u;
  WaitFor([&] {
    u = status();
    return u.is_object() && u["failures"].get<uint64_t>() > 0 && u["spool_batches"] > 0;
  });
  return u;
}

double MetricValue(const std::string& exposition, const std::string& name) {
  size_t at = exposition.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(exposition.substr(at + name.size() + 2));
}

}  // namespace

TEST_CASE("agent upload tls: https to a private CA's certificate (IP SAN): projections arrive") {
  TempDir dir;
  TestPki pki = MakeTestPki(dir);
  if (!HaveTools(pki)) return;
  PrometheusServer prom(dir, FreePort(), TlsWebConfig(pki, false), Trusting(pki, false));
  REQUIRE(prom.WaitReady());
  // The CA file starts out holding the wrong CA, then is replaced in place (as a rotation by
  // cert-manager would): the uploader notices the change and trusts the new content, no reload.
  const std::string trust = dir.Write("trust.pem", ReadFile(pki.wrong_ca_crt));
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.upload_url = "https://127.0.0.1:" + std::to_string(prom.port()) + "/api/v1/write";
  cfg.upload_tls_ca_file = trust;
  cfg.upload_interval_s = 1;
  cfg.upload_backoff_initial_ms = 100;
  cfg.upload_backoff_max_s = 1;
  DaemonHarness h;
  ReplaySpec spec;
  spec.step_delay_us = 20000;
  REQUIRE(h.Start(cfg, ReplayParts(1, spec)).ok());
  json failed = WaitForUploadFailure([&] { return UploadStatus(h); });
  REQUIRE(failed.is_object());
  CHECK(failed["sent_batches"] == 0);
  dir.Write("trust.pem.new", ReadFile(pki.ca_crt));
  REQUIRE(std::rename(dir.File("trust.pem.new").c_str(), trust.c_str()) == 0);
  REQUIRE(WaitFor([&] {
    auto runs = h.Runs(true);
    return runs.ok() && !(*runs)["runs"].empty() && (*runs)["runs"][0]["state"] == "finished";
  }));
  REQUIRE(WaitFor([&] {
    json now = UploadStatus(h);
    return now.is_object() && now["spool_batches"] == 0 && now["sent_batches"] > 0;
  }));
  json u = UploadStatus(h);
  CHECK(u["tls"] == "on");
  CHECK(u["auth"] == "none");
  CHECK(u["rejected_batches"] == 0);
  auto show = h.Show("job-0");
  REQUIRE(show.ok());
  CheckEveryProjectionArrived(prom, *show);
}

TEST_CASE("agent upload tls: mutual TLS: without a client certificate refused, with one sent") {
  TempDir dir;
  TestPki pki = MakeTestPki(dir);
  if (!HaveTools(pki)) return;
  PrometheusServer prom(dir, FreePort(), TlsWebConfig(pki, true), Trusting(pki, true));
  REQUIRE(prom.WaitReady());
  const std::string url = "https://localhost:" + std::to_string(prom.port()) + "/api/v1/write";
  {
    TempDir state;
    DaemonConfig cfg = DaemonHarness::TestConfig(state);
    cfg.upload_url = url;
    cfg.upload_tls_ca_file = pki.ca_crt;
    cfg.upload_interval_s = 1;
    cfg.upload_backoff_initial_ms = 100;
    DaemonHarness h;
    ReplaySpec spec;
    spec.step_delay_us = 20000;
    REQUIRE(h.Start(cfg, ReplayParts(1, spec)).ok());
    json u = WaitForUploadFailure([&] { return UploadStatus(h); });
    REQUIRE(u.is_object());
    MESSAGE("without a client certificate: " << u["last_error"]);
    CHECK(u["sent_batches"] == 0);
    CHECK(u["last_error"].get<std::string>().find("upload.tls_cert_file") != std::string::npos);
  }
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.upload_url = url;
  cfg.upload_tls_ca_file = pki.ca_crt;
  cfg.upload_tls_cert_file = pki.client_crt;
  cfg.upload_tls_key_file = pki.client_key;
  cfg.upload_interval_s = 1;
  DaemonHarness h;
  UploadAndDrain(h, cfg);
  CHECK(UploadStatus(h)["tls"] == "on, client certificate");
  auto show = h.Show("job-0");
  REQUIRE(show.ok());
  CheckEveryProjectionArrived(prom, *show);
}

TEST_CASE(
    "agent upload tls: wrong CA: nothing sent, spool kept, then CA fixed + SIGHUP: all arrives") {
  TempDir dir;
  TestPki pki = MakeTestPki(dir);
  if (!HaveTools(pki) || access(SeqpointdBinary().c_str(), X_OK) != 0) return;
  PrometheusServer prom(dir, FreePort(), TlsWebConfig(pki, false), Trusting(pki, false));
  REQUIRE(prom.WaitReady());
  auto config = [&](const std::string& ca) {
    return dir.Write("seqpointd.toml",
                     "[upload]\nurl = \"https://localhost:" + std::to_string(prom.port()) +
                         "/api/v1/write\"\ntls_ca_file = \"" + ca +
                         "\"\ninterval_s = 1\nbackoff_initial_ms = 100\nbackoff_max_s = 1\n");
  };
  const std::string path = config(pki.wrong_ca_crt);
  Seqpointd d(
      dir,
      {"--config", path, "--replay", RecordedTrace() + "@tls-run", "--replay-delay-us", "150000"},
      "seqpointd.log");
  REQUIRE(d.Ready());
  REQUIRE(!d.ClosedRun("tls-run").is_null());  // the whole run while nothing could be sent
  json u = WaitForUploadFailure([&] { return UploadStatus(d.Request("status")); });
  REQUIRE(u.is_object());
  const std::string error = u["last_error"];
  MESSAGE("wrong CA: " << error);
  CHECK(error.find("certificate verify failed") != std::string::npos);
  CHECK(error.find("upload.tls_ca_file") != std::string::npos);
  CHECK(u["sent_batches"] == 0);
  CHECK(u["spool_batches"].get<int64_t>() >= 2);
  CHECK(d.Log().find("certificate verify failed") != std::string::npos);
  std::string metrics = d.Metrics();
  CHECK(MetricValue(metrics, "seqpoint_upload_failures_total") > 0);
  CHECK(MetricValue(metrics, "seqpoint_upload_sent_batches_total") == 0);
  CHECK(MetricValue(metrics, "seqpoint_upload_spool_batches") >= 2);
  // The operator fixes the CA and reloads: every spooled batch arrives.
  config(pki.ca_crt);
  d.Signal(SIGHUP);
  REQUIRE(WaitFor([&] {
    json now = UploadStatus(d.Request("status"));
    return now.is_object() && now["spool_batches"] == 0;
  }));
  json after = UploadStatus(d.Request("status"));
  CHECK(after["rejected_batches"] == 0);
  CHECK(after["dropped_batches"] == 0);
  CHECK(after["last_error"] == "");
  CheckEveryProjectionArrived(prom, d.Show("tls-run"));
  // Samples spooled during the failure arrived with their own timestamps (at least once).
  json count = prom.Query("count_over_time(seqpoint_run_iterations_total[1h])");
  REQUIRE(count.size() == 1);
  CHECK(std::stoi(count[0]["value"][1].get<std::string>()) >= 3);
}

TEST_CASE("agent upload tls: a name the certificate lacks fails, insecure_skip_verify sends") {
  TempDir dir;
  TestPki pki = MakeTestPki(dir);
  if (!HaveTools(pki)) return;
  PrometheusServer prom(dir, FreePort(), TlsWebConfig(pki, false), Trusting(pki, false));
  REQUIRE(prom.WaitReady());
  const std::string url = "https://127.0.0.1:" + std::to_string(prom.port()) + "/api/v1/write";
  {
    TempDir state;
    DaemonConfig cfg = DaemonHarness::TestConfig(state);
    cfg.upload_url = url;
    cfg.upload_tls_ca_file = pki.ca_crt;
    cfg.upload_tls_server_name = "metrics.example.com";
    cfg.upload_interval_s = 1;
    DaemonHarness h;
    REQUIRE(h.Start(cfg, ReplayParts(1, ReplaySpec{})).ok());
    json u = WaitForUploadFailure([&] { return UploadStatus(h); });
    REQUIRE(u.is_object());
    MESSAGE("wrong name: " << u["last_error"]);
    CHECK(u["last_error"].get<std::string>().find("not for 'metrics.example.com'") !=
          std::string::npos);
    CHECK(u["last_error"].get<std::string>().find("upload.tls_server_name") != std::string::npos);
  }
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.upload_url = url;
  cfg.upload_tls_insecure_skip_verify = true;  // no CA at all: only this lets it through
  cfg.upload_interval_s = 1;
  DaemonHarness h;
  UploadAndDrain(h, cfg);
  CHECK(UploadStatus(h)["tls"] == "on, NOT verified");
}

TEST_CASE("agent upload tls: basic auth: a wrong password keeps the spool, a fixed file: sent") {
  TempDir dir;
  TestPki pki = MakeTestPki(dir);
  if (!HaveTools(pki)) return;
  // Prometheus checks bcrypt hashes (basic_auth_users); python3-bcrypt makes one.
  const std::string hash_file = dir.File("hash");
  if (std::system(("/usr/bin/python3 -c 'import bcrypt,sys; sys.stdout.write(bcrypt.hashpw("
                   "b\"s3cret-pass\", bcrypt.gensalt(rounds=4)).decode())' > " +
                   hash_file + " 2>/dev/null")
                      .c_str()) != 0) {
    MESSAGE("skipped: python3-bcrypt not installed (scripts/setup.sh installs it)");
    return;
  }
  WebClient client = Trusting(pki, false);
  client.authorization = "Basic c2VxcG9pbnQ6czNjcmV0LXBhc3M=";  // seqpoint:s3cret-pass
  PrometheusServer prom(
      dir, FreePort(),
      TlsWebConfig(pki, false) + "basic_auth_users:\n  seqpoint: " + ReadFile(hash_file) + "\n",
      client);
  REQUIRE(prom.WaitReady());
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  cfg.upload_url = "https://localhost:" + std::to_string(prom.port()) + "/api/v1/write";
  cfg.upload_tls_ca_file = pki.ca_crt;
  cfg.upload_basic_auth_user = "seqpoint";
  cfg.upload_basic_auth_password_file = dir.Write("password", "wrong-pass\n");
  cfg.upload_interval_s = 1;
  cfg.upload_backoff_initial_ms = 100;
  cfg.upload_backoff_max_s = 1;
  DaemonHarness h;
  ReplaySpec spec;
  spec.step_delay_us = 20000;
  REQUIRE(h.Start(cfg, ReplayParts(1, spec)).ok());
  json u = WaitForUploadFailure([&] { return UploadStatus(h); });
  REQUIRE(u.is_object());
  MESSAGE("wrong password: " << u["last_error"]);
  CHECK(u["last_error"].get<std::string>().find("HTTP 401") != std::string::npos);
  CHECK(u["rejected_batches"] == 0);  // a 401 is the config's fault: nothing dropped
  CHECK(u["auth"] == "basic");
  // The password is read before every request: fixing the file is enough.
  dir.Write("password", "s3cret-pass\n");
  REQUIRE(WaitFor([&] {
    json now = UploadStatus(h);
    return now.is_object() && now["spool_batches"] == 0 && now["sent_batches"] > 0;
  }));
  REQUIRE(WaitFor([&] {
    auto runs = h.Runs(true);
    return runs.ok() && !(*runs)["runs"].empty() && (*runs)["runs"][0]["state"] == "finished";
  }));
  REQUIRE(WaitFor([&] { return UploadStatus(h)["spool_batches"] == 0; }));
  auto show = h.Show("job-0");
  REQUIRE(show.ok());
  CheckEveryProjectionArrived(prom, *show);
  // Secrets stay out of what the agent shows.
  ControlRequest r;
  r.cmd = "status";
  std::string shown =
      h.Request(r)->dump() + HttpGet("127.0.0.1", h.metrics_port(), "/metrics").body;
  CHECK(shown.find("s3cret") == std::string::npos);
  CHECK(shown.find("c2VxcG9pbnQ6") == std::string::npos);
}

TEST_CASE("agent upload tls: config errors name the key and the fix") {
  TempDir dir;
  TestPki pki = MakeTestPki(dir);
  REQUIRE_MESSAGE(pki.error.empty(), pki.error);
  auto parse = [&](const std::string& upload) {
    auto c = ParseConfig("[upload]\n" + upload, "t.toml");
    if (!c.ok()) return c.status().message();
    seqpoint::Status st = ValidateUploadSecurity(*c);
    return st.ok() ? std::string("OK") : st.message();
  };
  auto q = [](const std::string& s) { return "\"" + s + "\""; };
  const std::string https = "url = \"https://localhost/api/v1/write\"\n";
  auto u = ParseHttpUrl("https://mimir.example.com/api/v1/push");
  REQUIRE(u.ok());
  CHECK(u->tls);
  CHECK(u->port == 443);
  CHECK(parse(https + "tls_ca_file = " + q(pki.ca_crt) + "\n") == "OK");
  CHECK(parse(https + "tls_cert_file = " + q(pki.client_crt) +
              "\ntls_key_file = " + q(pki.client_key) + "\n") == "OK");
  std::string secret_url = parse("url = \"https://user:hunter2@h/x\"\n");
  CHECK(secret_url.find("basic_auth_password_file") != std::string::npos);
  CHECK(secret_url.find("hunter2") == std::string::npos);
  CHECK(parse("url = \"http://h/x\"\ntls_ca_file = " + q(pki.ca_crt) + "\n").find("https://") !=
        std::string::npos);
  CHECK(parse(https + "tls_cert_file = " + q(pki.client_crt) + "\n").find("go together") !=
        std::string::npos);
  std::string mismatch = parse(https + "tls_cert_file = " + q(pki.client_crt) +
                               "\ntls_key_file = " + q(pki.server_key) + "\n");
  MESSAGE(mismatch);
  CHECK(mismatch.find("upload.tls_key_file") != std::string::npos);
  CHECK(mismatch.find("matching pair") != std::string::npos);
  std::string missing = parse(https + "tls_ca_file = " + q(dir.File("none.pem")) + "\n");
  CHECK(missing.find("upload.tls_ca_file: cannot read") != std::string::npos);
  CHECK(missing.find("No such file") != std::string::npos);
  std::string not_pem = parse(https + "tls_ca_file = " + q(dir.File("pki/server.ext")) + "\n");
  MESSAGE(not_pem);
  CHECK(not_pem.find("is not a PEM file") != std::string::npos);
  REQUIRE(std::system(("openssl pkey -in " + pki.client_key + " -aes256 -passout pass:x -out " +
                       dir.File("encrypted.key"))
                          .c_str()) == 0);
  std::string encrypted = parse(https + "tls_cert_file = " + q(pki.client_crt) +
                                "\ntls_key_file = " + q(dir.File("encrypted.key")) + "\n");
  MESSAGE(encrypted);
  CHECK(encrypted.find("unencrypted") != std::string::npos);
  CHECK(parse(https + "tls_ca_file = \"ca.pem\"\n").find("absolute path") != std::string::npos);
  CHECK(parse(https + "tls_insecure_skip_verify = \"yes\"\n").find("true or false") !=
        std::string::npos);
  const std::string token = dir.Write("token", "tok-123\n");
  const std::string password = dir.Write("password", "pw\n");
  CHECK(parse(https + "bearer_token_file = " + q(token) + "\nbasic_auth_user = \"u\"\n" +
              "basic_auth_password_file = " + q(password) + "\n")
            .find("one kind of credentials") != std::string::npos);
  CHECK(parse(https + "basic_auth_user = \"u\"\n").find("go together") != std::string::npos);
  // Credentials: read from the file at each request, trailing newline dropped, never echoed.
  auto bearer = ReadAuthorization({token, "", ""});
  REQUIRE(bearer.ok());
  CHECK(**bearer == "Bearer tok-123");
  auto basic = ReadAuthorization({"", "seqpoint", dir.Write("p2", "s3cret")});
  REQUIRE(basic.ok());
  CHECK(**basic == "Basic c2VxcG9pbnQ6czNjcmV0");
  CHECK(!ReadAuthorization({}).value().has_value());
  auto empty = ReadAuthorization({dir.Write("empty", "\n"), "", ""});
  CHECK(empty.status().message().find("upload.bearer_token_file") != std::string::npos);
  CHECK(empty.status().message().find("is empty") != std::string::npos);
  auto two = ReadAuthorization({dir.Write("two", "tok-1\ntok-2\n"), "", ""});
  CHECK(two.status().message().find("more than one line") != std::string::npos);
  CHECK(two.status().message().find("tok-") == std::string::npos);
  CHECK(parse(https + "bearer_token_file = " + q(dir.File("absent")) + "\n")
            .find("upload.bearer_token_file: cannot read") != std::string::npos);
}
