#include "agent/config/config.h"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>

#include "agent/config/config_validate.h"
#include "agent/testing/test_util.h"

using namespace seqpoint::daemon;

TEST_CASE("agent config: every key has a default, and the default file parses to the defaults") {
  auto cfg = ParseConfig("", "empty.toml");
  REQUIRE(cfg.ok());
  CHECK(cfg->metrics_listen == "127.0.0.1:9464");
  CHECK(cfg->ControlSocketPath() == "/run/seqpoint/control.sock");
  CHECK(cfg->StateDbPath() == "/var/lib/seqpoint/state.db");
  std::string doc = DefaultConfigToml();
  for (const ConfigKeyDoc& k : ConfigKeys()) {
    CHECK(!k.doc.empty());
    CHECK(doc.find(std::string(k.key.substr(k.key.find('.') + 1)) + " = ") != std::string::npos);
  }
  // Uncomment every key: the file of defaults must parse and give the defaults back.
  std::string uncommented;
  for (size_t pos = 0; pos < doc.size();) {
    size_t end = doc.find('\n', pos);
    std::string line = doc.substr(pos, end - pos);
    if (std::regex_search(line, std::regex("^# [a-z_]+ = "))) line = line.substr(2);
    uncommented += line + "\n";
    pos = end + 1;
  }
  auto round = ParseConfig(uncommented, "defaults.toml");
  REQUIRE_MESSAGE(round.ok(), round.status().ToString());
  CHECK(round->run_budget == DaemonConfig{}.run_budget);
  CHECK(round->upload_spool_max_bytes == DaemonConfig{}.upload_spool_max_bytes);
}

TEST_CASE("agent config: values are read") {
  auto cfg = ParseConfig(R"(
[daemon]
log_level = "debug"
state_dir = "/tmp/x"
[runs]
budget = 12
group_by = "cgroup"
[upload]
url = "http://127.0.0.1:9090/api/v1/write"
labels = { cluster = "a", node = "n1" }
[collectors]
rapl.enabled = true
[collectors.perf]
events = ["task-clock", "page-faults"]
)",
                         "t.toml");
  REQUIRE_MESSAGE(cfg.ok(), cfg.status().ToString());
  CHECK(cfg->log_level == LogLevel::kDebug);
  CHECK(cfg->run_budget == 12);
  CHECK(cfg->upload_labels.at("node") == "n1");
  CHECK(cfg->collectors.perf.events.size() == 2);
  CHECK(cfg->collectors.rapl.enabled == true);
  CHECK(cfg->StateDbPath() == "/tmp/x/state.db");
}

TEST_CASE("agent config: an unknown key names the file, line and the known keys") {
  auto cfg = ParseConfig("[runs]\nbudget = 3\nbugdet = 4\n", "/etc/seqpoint/seqpointd.toml");
  REQUIRE(!cfg.ok());
  const std::string& m = cfg.status().message();
  CHECK(m.find("/etc/seqpoint/seqpointd.toml:3:1") != std::string::npos);
  CHECK(m.find("unknown key 'runs.bugdet'") != std::string::npos);
  CHECK(m.find("budget") != std::string::npos);
  auto col = ParseConfig("[collectors.perf]\nevnets = []\n", "c.toml");
  REQUIRE(!col.ok());
  CHECK(col.status().message().find("c.toml:2:1: unknown key 'collectors.perf.evnets'") !=
        std::string::npos);
  auto col_type = ParseConfig("[collectors.perf]\nevents = 3\n", "c.toml");
  REQUIRE(!col_type.ok());
  CHECK(col_type.status().message().find("'collectors.perf.events'") != std::string::npos);
  auto section = ParseConfig("[run]\nbudget = 3\n", "s.toml");
  REQUIRE(!section.ok());
  CHECK(section.status().message().find("unknown section 'run'") != std::string::npos);
}

TEST_CASE("agent config: a wrong type or value names the key, the line and what is expected") {
  auto cfg = ParseConfig("[runs]\n\nbudget = \"ten\"\n", "t.toml");
  REQUIRE(!cfg.ok());
  CHECK(cfg.status().message().find("t.toml:3:") != std::string::npos);
  CHECK(cfg.status().message().find("'runs.budget' must be an integer") != std::string::npos);
  auto range = ParseConfig("[runs]\nbudget = 0\n", "t.toml");
  CHECK(range.status().message().find("between 1 and") != std::string::npos);
  auto level = ParseConfig("[daemon]\nlog_level = \"loud\"\n", "t.toml");
  CHECK(level.status().message().find("'loud'") != std::string::npos);
  auto url = ParseConfig("[upload]\nurl = \"ftp://x/y\"\n", "t.toml");
  CHECK(url.status().message().find("upload.url") != std::string::npos);
  auto group = ParseConfig("[runs]\ngroup_by = \"label\"\n", "t.toml");
  CHECK(group.status().message().find("env:NAME") != std::string::npos);
  auto syntax = ParseConfig("[runs\n", "t.toml");
  CHECK(syntax.status().message().find("t.toml:1:") != std::string::npos);
  auto not_table = ParseConfig("runs = 3\n", "t.toml");
  CHECK(not_table.status().message().find("must be a table") != std::string::npos);
}

TEST_CASE("agent config: a missing file is an error unless allowed") {
  testing::TempDir dir;
  CHECK(!LoadConfig(dir.File("none.toml"), false).ok());
  CHECK(LoadConfig(dir.File("none.toml"), true).ok());
  auto cfg = LoadConfig(dir.Write("a.toml", "[metrics]\nlisten = \"\"\n"), false);
  REQUIRE(cfg.ok());
  CHECK(cfg->metrics_listen.empty());
}

TEST_CASE("agent config: host:port and URL parsing") {
  CHECK(ParseHostPort("[::1]:80")->host == "::1");
  CHECK(ParseHostPort("127.0.0.1:0")->port == 0);
  CHECK(!ParseHostPort("127.0.0.1").ok());
  CHECK(!ParseHostPort("h:99999").ok());
  auto u = ParseHttpUrl("http://localhost:9090/api/v1/write");
  REQUIRE(u.ok());
  CHECK(u->host == "localhost");
  CHECK(u->port == 9090);
  CHECK(u->target == "/api/v1/write");
  CHECK(ParseHttpUrl("http://h")->target == "/");
}

TEST_CASE("agent config: a quoted number names what was found and the fix") {
  auto cfg = ParseConfig("[runs]\nbudget = \"64\"\n", "t.toml");
  REQUIRE(!cfg.ok());
  const std::string& m = cfg.status().message();
  CHECK(m.find("t.toml:2:10: key 'runs.budget' must be an integer, found a string (\"64\"); "
               "write budget = 64") != std::string::npos);
  CHECK(m.find("(expected integer)") == std::string::npos);
  auto fraction = ParseConfig("[runs]\nbudget_fraction = \"0.01\"\n", "t.toml");
  CHECK(fraction.status().message().find("found a string (\"0.01\"); write budget_fraction = 0.01") !=
        std::string::npos);
  auto word = ParseConfig("[runs]\nbudget = \"ten\"\n", "t.toml");
  CHECK(word.status().message().find("must be an integer, found a string (\"ten\")") !=
        std::string::npos);
  CHECK(word.status().message().find("write") == std::string::npos);
  auto flt = ParseConfig("[runs]\nbudget = 6.5\n", "t.toml");
  CHECK(flt.status().message().find("found a float (6.5)") != std::string::npos);
}

TEST_CASE("agent config: a misspelt perf event names the key, the line and the nearest names") {
  auto cfg = ParseConfig("[collectors.perf]\nevents = [\"task-clock\", \"task-clok\"]\n", "p.toml");
  REQUIRE(!cfg.ok());
  const std::string& m = cfg.status().message();
  CHECK(m.find("p.toml:2:") != std::string::npos);
  CHECK(m.find("'collectors.perf.events'") != std::string::npos);
  CHECK(m.find("unknown perf event \"task-clok\"") != std::string::npos);
  CHECK(m.find("nearest valid name: \"task-clock\"") != std::string::npos);
  CHECK(ParseConfig("[collectors]\nperf.events = [\"cycles\", \"r01c2\", \"LLC-load-misses\"]\n",
                    "p.toml")
            .ok());
}

TEST_CASE("agent config: a checked value names its line, a top-level key its section") {
  auto action = ParseConfig("[runs]\nbudget = 8\nobserver_effect_action = \"dorp\"\n", "a.toml");
  REQUIRE(!action.ok());
  CHECK(action.status().message().find("a.toml:3:26: key 'runs.observer_effect_action' must be") !=
        std::string::npos);
  CHECK(action.status().message().find("'dorp'") != std::string::npos);
  auto listen = ParseConfig("[metrics]\nlisten = \"nowhere\"\n", "a.toml");
  CHECK(listen.status().message().find("a.toml:2:10: key 'metrics.listen': ") != std::string::npos);
  auto top = ParseConfig("budget = 5\n", "top.toml");
  REQUIRE(!top.ok());
  CHECK(top.status().message().find("top.toml:1:1: unknown key 'budget' at the top level; did you "
                                    "mean [runs] budget?") != std::string::npos);
  auto nowhere = ParseConfig("bogus = 5\n", "top.toml");
  CHECK(nowhere.status().message().find("unknown key 'bogus' at the top level") != std::string::npos);
}

TEST_CASE("agent config: the GPU window rule's tail and bound, the tail below the bound") {
  auto ok = ParseConfig("[runs]\ngpu_sync_tail_ms = 5\ngpu_sync_bound_ms = 3000\n", "g.toml");
  REQUIRE_MESSAGE(ok.ok(), ok.status().ToString());
  CHECK(ok->run_gpu_sync_tail_ms == 5);
  CHECK(ok->run_gpu_sync_bound_ms == 3000);
  auto crossed = ParseConfig("[runs]\ngpu_sync_tail_ms = 20\ngpu_sync_bound_ms = 10\n", "g.toml");
  REQUIRE(!crossed.ok());
  const std::string m = crossed.status().message();
  CHECK(m.find("g.toml:2:") != std::string::npos);
  CHECK(m.find("key 'runs.gpu_sync_tail_ms' (20) must be less than runs.gpu_sync_bound_ms (10)") !=
        std::string::npos);
  CHECK(m.find("lower runs.gpu_sync_tail_ms") != std::string::npos);
  auto range = ParseConfig("[runs]\ngpu_sync_bound_ms = 0\n", "g.toml");
  REQUIRE(!range.ok());
  CHECK(range.status().message().find("'runs.gpu_sync_bound_ms' must be between 1 and 60000") !=
        std::string::npos);
}

TEST_CASE("agent config: a directory, a device, a FIFO or an oversized file is refused by name") {
  testing::TempDir dir;
  auto is_dir = LoadConfig(dir.path(), false);
  REQUIRE(!is_dir.ok());
  CHECK(is_dir.status().message().find("is a directory, not a regular file") != std::string::npos);
  // Only an absent file falls back on the defaults, never a directory at the default path.
  CHECK(!LoadConfig(dir.path(), true).ok());
  auto zero = LoadConfig("/dev/zero", false);  // would never end if read
  REQUIRE(!zero.ok());
  CHECK(zero.status().message().find("'/dev/zero' is a character device") != std::string::npos);
  std::string fifo = dir.File("fifo.toml");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  auto pipe = LoadConfig(fifo, false);  // would block in open() without a writer
  REQUIRE(!pipe.ok());
  CHECK(pipe.status().message().find("is a FIFO (named pipe), not a regular file") !=
        std::string::npos);
  std::string big = dir.Write("big.toml", std::string(kMaxConfigFileBytes + 1, '#'));
  auto large = LoadConfig(big, false);
  REQUIRE(!large.ok());
  CHECK(large.status().message().find("over the limit of 1048576 bytes") != std::string::npos);
  // At the limit exactly is fine (a file of comments).
  CHECK(LoadConfig(dir.Write("max.toml", std::string(kMaxConfigFileBytes, '#')), false).ok());
}

TEST_CASE("agent config: an unreadable file says permission denied and the fix") {
  testing::TempDir dir;
  std::string file = dir.Write("secret.toml", "[runs]\nbudget = 8\n");
  REQUIRE(chmod(file.c_str(), 0) == 0);
  REQUIRE(chmod(dir.path().c_str(), 0755) == 0);
  // root reads any file: check as an unprivileged user in a child.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
    auto cfg = LoadConfig(file, false);
    std::string m = cfg.ok() ? "ok" : cfg.status().message();
    if (!cfg.ok() && cfg.status().code() != seqpoint::ErrorCode::kPermissionDenied) m = "code " + m;
    (void)!write(fds[1], m.data(), m.size());
    _exit(0);
  }
  close(fds[1]);
  std::string m;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) m.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(m.find("cannot read config file '" + file + "': permission denied") == 0);
  CHECK(m.find("chmod 0644") != std::string::npos);
}
