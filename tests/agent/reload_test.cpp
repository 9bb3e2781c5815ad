// SIGHUP reloads apply whole or not at all (Daemon::Reload, docs/failure-modes.md): for each
// part that can refuse a new config (the file itself, the control group, the uploader and its
// TLS files, the probes' new set), a reload whose new file also changes the upload URL fails,
// and afterwards everything still runs on the old config (the old uploader, its URL, no reload
// counted), status and /metrics say the reload failed and why, and the next good reload
// applies. The daemon runs in-process; the signal is a real SIGHUP to this process.
#include <doctest/doctest.h>
#include <signal.h>

#include <fstream>

#include "agent/testing/test_harness.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

// The source when "the probes' new set does not build": it delivers nothing, and refuses every
// reconfiguration (the eBPF source needs root and a kernel; its refusal is what matters here).
class RefusingSource : public IterationSource {
 public:
  std::string_view name() const override { return "refusing"; }
  seqpoint::Status Start(IterationSink*) override { return seqpoint::Status::Ok(); }
  void Stop() override {}
  void SetBeginHooks(pid_t, bool) override {}
  SourceStats stats() const override { return {}; }
  seqpoint::Status Reconfigure(const DaemonConfig&) override {
    return seqpoint::InvalidArgument("probes.zero_code: the new probe set does not load");
  }
};

std::string Config(const TempDir& dir, const std::string& upload_url,
                   const std::string& extra = "") {
  return "[daemon]\nstate_dir = \"" + dir.path() + "/state\"\nruntime_dir = \"" + dir.path() +
         "/run\"\nflush_interval_ms = 200\nlog_level = \"warn\"\n[metrics]\nlisten = "
         "\"127.0.0.1:0\"\n[upload]\nurl = \"" +
         upload_url + "\"\n" + extra;
}

std::string Replace(std::string text, const TempDir& dir) {
  for (size_t at; (at = text.find("@DIR@")) != std::string::npos;) text.replace(at, 5, dir.path());
  return text;
}

json Status(const DaemonHarness& h) {
  ControlRequest r;
  r.cmd = "status";
  auto s = h.Request(r);
  REQUIRE(s.ok());
  return *s;
}

}  // namespace

TEST_CASE("reload: whichever part fails, nothing changes, and the next good reload applies") {
  struct Case {
    const char* part;
    std::string extra;         // appended to the new file
    bool broken_file = false;  // the new file does not parse
    bool refusing_source = false;
  };
  const std::vector<Case> cases = {
      {"config file", "", true, false},
      {"control group", "[control]\ngroup = \"no-such-group-seqpoint-test\"\n", false, false},
      // A CA file that exists (the config check passes) but holds no certificate: only
      // building the new uploader finds it, after the old one would have been stopped.
      {"uploader TLS", "tls_ca_file = \"@DIR@/ca.pem\"\n", false, false},
      {"probes", "", false, true},
  };
  const std::string old_url = "http://127.0.0.1:9/old/api/v1/write";
  for (const Case& c : cases) {
    const std::string part = c.part;
    CAPTURE(part);
    TempDir dir;
    std::ofstream(dir.File("ca.pem")) << "not a certificate\n";
    const std::string path = dir.File("seqpointd.toml");
    std::ofstream(path) << Config(dir, old_url);
    auto cfg = LoadConfig(path, false);
    REQUIRE(cfg.ok());
    DaemonParts parts;
    if (c.refusing_source) {
      parts.source = [](boost::asio::io_context&,
                        const DaemonConfig&) -> seqpoint::Result<std::unique_ptr<IterationSource>> {
        return std::unique_ptr<IterationSource>(new RefusingSource);
      };
    }
    DaemonHarness h;
    REQUIRE(h.Start(*cfg, std::move(parts), path).ok());
    REQUIRE(Status(h)["upload"]["url"] == old_url);

    // The new file changes the upload URL too (a half-applied reload would show it), and has
    // this case's fault.
    const std::string new_url = part == "uploader TLS" ? "https://127.0.0.1:9/new/api/v1/write"
                                                       : "http://127.0.0.1:9/new/api/v1/write";
    std::ofstream(path) << (c.broken_file ? "[upload\nurl = \"" + new_url + "\"\n"
                                          : Config(dir, new_url, Replace(c.extra, dir)));
    kill(getpid(), SIGHUP);
    REQUIRE(WaitFor([&] { return Status(h)["reload"]["failures"] == 1; }));
    json s = Status(h);
    CHECK(s["reload"]["reloads"] == 0);
    CHECK(s["upload"]["url"] == old_url);  // the old uploader, untouched
    CHECK(s["reload"]["last_error"].is_string());
    MESSAGE(part << ": " << s["reload"]["last_error"].get<std::string>());
    const std::string metrics = HttpGet("127.0.0.1", h.metrics_port(), "/metrics").body;
    CHECK(metrics.find("seqpoint_config_last_reload_failed 1") != std::string::npos);
    CHECK(metrics.find("seqpoint_config_reload_failures_total 1") != std::string::npos);

    if (c.refusing_source) continue;  // this source refuses every config
    // Fixed: the next reload applies whole.
    std::ofstream(path) << Config(dir, new_url == old_url ? old_url : "http://127.0.0.1:9/fixed");
    kill(getpid(), SIGHUP);
    REQUIRE(WaitFor([&] { return Status(h)["reload"]["reloads"] == 1; }));
    s = Status(h);
    CHECK(s["upload"]["url"] == "http://127.0.0.1:9/fixed");
    CHECK(s["reload"]["last_error"].is_null());
  }
}
