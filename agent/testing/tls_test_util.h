// Test helpers for the https:// upload: a throw-away PKI made with the openssl CLI (a CA, a
// server certificate for localhost and 127.0.0.1, a client certificate, and a second CA that
// signed neither), and a blocking HTTP(S) GET that can present a CA, a client certificate and
// an Authorization header (to query a Prometheus behind --web.config.file).
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdlib>
#include <string>

#include "agent/testing/test_harness.h"

namespace seqpoint::daemon::testing {

struct TestPki {
  std::string ca_crt, ca_key;          // the CA that signed server and client
  std::string server_crt, server_key;  // SAN DNS:localhost, IP:127.0.0.1
  std::string client_crt, client_key;  // CN seqpointd-test, clientAuth
  std::string wrong_ca_crt;            // a CA that signed nothing here
  std::string error;                   // non-empty: the openssl CLI failed (its output)
};

// Creates the PKI under dir/pki (EC P-256 keys: fast to make), valid for two days.
inline TestPki MakeTestPki(const TempDir& dir) {
  TestPki p;
  const std::string d = dir.path() + "/pki";
  const std::string log = d + "/openssl.log";
  std::filesystem::create_directories(d);
  auto run = [&](const std::string& cmd) {
    if (!p.error.empty()) return;
    if (std::system(("cd " + d + " && " + cmd + " >>" + log + " 2>&1").c_str()) != 0) {
      p.error = "`" + cmd + "` failed: " + ReadFile(log);
    }
  };
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  for (const std::string ca : {"ca", "wrong-ca"}) {
    run("openssl req -x509 " + key + " -keyout " + ca + ".key -out " + ca +
        ".crt -days 2 -subj /CN=seqpoint-test-" + ca +
        " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign");
  }
  dir.Write("pki/server.ext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  dir.Write("pki/client.ext", "extendedKeyUsage=clientAuth\n");
  for (const std::string leaf : {"server", "client"}) {
    run("openssl req " + key + " -keyout " + leaf + ".key -out " + leaf + ".csr -subj /CN=" +
        (leaf == "server" ? std::string("localhost") : std::string("seqpointd-test")));
    run("openssl x509 -req -in " + leaf + ".csr -CA ca.crt -CAkey ca.key -CAcreateserial -out " +
        leaf + ".crt -days 2 -extfile " + leaf + ".ext");
  }
  p.ca_crt = d + "/ca.crt";
  p.ca_key = d + "/ca.key";
  p.server_crt = d + "/server.crt";
  p.server_key = d + "/server.key";
  p.client_crt = d + "/client.crt";
  p.client_key = d + "/client.key";
  p.wrong_ca_crt = d + "/wrong-ca.crt";
  return p;
}

// How a test client reaches a server: plain, or TLS trusting ca_file (and presenting a client
// certificate when given); with an Authorization header when given.
struct WebClient {
  bool tls = false;
  std::string ca_file;
  std::string cert_file, key_file;
  std::string authorization;  // "Basic ..."
};

inline HttpResult HttpGetWith(const std::string& host, int port, const std::string& target,
                              const WebClient& c) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  HttpResult out;
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    http::request<http::empty_body> req(http::verb::get, target, 11);
    req.set(http::field::host, host);
    if (!c.authorization.empty()) req.set(http::field::authorization, c.authorization);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    if (!c.tls) {
      beast::tcp_stream stream(io);
      stream.expires_after(std::chrono::seconds(30));
      stream.connect(resolver.resolve(host, std::to_string(port)));
      http::write(stream, req);
      http::read(stream, buf, res);
    } else {
      asio::ssl::context ctx(asio::ssl::context::tls_client);
      ctx.load_verify_file(c.ca_file);
      ctx.set_verify_mode(asio::ssl::verify_peer);
      if (!c.cert_file.empty()) {
        ctx.use_certificate_chain_file(c.cert_file);
        ctx.use_private_key_file(c.key_file, asio::ssl::context::pem);
      }
      beast::ssl_stream<beast::tcp_stream> stream(io, ctx);
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
      beast::get_lowest_layer(stream).connect(resolver.resolve(host, std::to_string(port)));
      stream.handshake(asio::ssl::stream_base::client);
      http::write(stream, req);
      http::read(stream, buf, res);
    }
    out.status = static_cast<int>(res.result_int());
    out.body = res.body();
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace seqpoint::daemon::testing
