// Discovery with real exec/exit tracepoints and ld.so uprobes on real processes: processes
// started after the agent, already running, loading the provider late (Python), eight at once,
// and one in a chroot (a container's view of the file system).
#include "probes/discovery/process_discovery.h"

#include <dlfcn.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "probes/iteration_probes.h"
#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"

namespace seqpoint::probes {
namespace {

using testing::ChildProcess;
using testing::CollectingSink;
using testing::PollUntil;
using testing::TestProgram;

// Parent pid from /proc/PID/stat (field 4).
int ParentOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  int ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

// The glue the daemon and `seqpoint probe` use: attach what discovery finds, detach what goes.
// Tests attach only to their own children: other jobs on this machine (a trainer another
// engineer is timing) are left alone.
class Attacher : public DiscoveryListener {
 public:
  explicit Attacher(IterationProbes* probes) : probes_(probes) {}
  bool OnTargets(const ProcessTargets& targets) override {
    if (ParentOf(targets.identity.pid) != getpid()) return false;
    auto r = probes_->AttachTargets(targets);
    if (r.ok()) attached.insert(targets.identity.pid);
    return r.ok();
  }
  void OnGone(int pid, const std::optional<ExitStatus>& how) override {
    probes_->DetachPid(pid);
    gone.insert(pid);
    order.push_back(pid);
    if (how) exit_status[pid] = *how;
  }
  void OnLibrariesChanged(int pid) override { ++libraries_changed[pid]; }
  std::map<int, int> libraries_changed;  // per watched pid, how often it was told
  std::set<int> attached;
  std::set<int> gone;
  std::vector<int> order;                 // of OnGone calls
  std::map<int, ExitStatus> exit_status;  // as the exit tracepoint reported it

 private:
  IterationProbes* probes_;
};

struct Agent {
  CollectingSink sink;
  std::unique_ptr<IterationProbes> probes;
  std::unique_ptr<Attacher> attacher;
  std::unique_ptr<ProcessDiscovery> discovery;

  explicit Agent(DiscoveryOptions options = {}) {
    auto p = IterationProbes::Create({}, &sink);
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    probes = std::move(*p);
    attacher = std::make_unique<Attacher>(probes.get());
    auto d = ProcessDiscovery::Create(options, attacher.get());
    REQUIRE_MESSAGE(d.ok(), d.status().ToString());
    discovery = std::move(*d);
    Status s = discovery->Start();
    REQUIRE_MESSAGE(s.ok(), s.ToString());
  }
  void Poll() {
    REQUIRE(discovery->Poll(10).ok());
    REQUIRE(probes->Poll(10).ok());
  }
  bool WaitFor(int pid, size_t complete) {
    return PollUntil([&] { Poll(); }, [&] { return sink.CompleteOf(pid) >= complete; });
  }
  bool WaitGone(int pid) {
    return PollUntil([&] { Poll(); }, [&] { return attacher->gone.count(pid) > 0; });
  }
};

// Checks every iteration of `pid` carries `seq_len`. Discovery attaches to a process already
// looping, so a thread's first end can come without its begin: that end is flagged NO_BEGIN
// and knows no SL (seen in CI: SL 0 on one of eight ranks). It is allowed, flagged, once per
// thread; every other end must carry the SL.
void CheckSeqLens(const CollectingSink& sink, int pid, uint32_t seq_len) {
  std::set<uint32_t> threads_without_begin;
  for (const IterationEvent& e : sink.EndsOf(pid)) {
    if (e.flags & SP_FLAG_NO_BEGIN) {
      CHECK_MESSAGE(threads_without_begin.insert(e.tid).second,
                    "thread " << e.tid << " ended two iterations without their begin");
      continue;
    }
    CHECK_MESSAGE(e.seq_len == seq_len, "pid " << pid << " iteration " << e.iter);
  }
}

// Lets a --loop workload stop and checks it is detached afterwards.
void StopAndCheckDetached(Agent& agent, ChildProcess& child) {
  REQUIRE(child.WriteLine("stop").ok());
  REQUIRE(child.Wait().ok());
  CHECK(agent.WaitGone(child.pid()));
  CHECK_FALSE(agent.probes->IsAttached(child.pid()));
}

// Ends a --loop workload (a line on stdin, then its --finish; or SIGKILL), reaps it and waits
// for discovery to report it gone. Checks that the exit tracepoint's status is exactly what
// wait() gave the parent, and returns it.
ExitStatus EndAndCompare(Agent& agent, ChildProcess& child, bool kill = false) {
  REQUIRE(agent.WaitFor(child.pid(), 3));  // attached: its exit will be reported
  if (kill) {
    child.Kill();
  } else {
    REQUIRE(child.WriteLine("stop").ok());
  }
  auto status = child.WaitStatus();
  REQUIRE(status.ok());
  REQUIRE(agent.WaitGone(child.pid()));
  auto it = agent.attacher->exit_status.find(child.pid());
  REQUIRE_MESSAGE(it != agent.attacher->exit_status.end(), "no exit status for " << child.pid());
  ExitStatus waited = ExitStatus::FromWaitStatus(*status);
  CHECK(it->second.exit_code == waited.exit_code);
  CHECK(it->second.signal == waited.signal);
  CHECK(it->second.core_dumped == waited.core_dumped);
  MESSAGE("pid " << child.pid() << ": " << it->second.Describe());
  return it->second;
}

TEST_CASE("discovery: exit status from the exit tracepoint, as wait() reports it") {
  if (!testing::CanUseBpf()) return;
  DiscoveryOptions options;
  options.scan_at_start = false;
  Agent agent(options);
  auto start = [](std::vector<std::string> extra) {
    std::vector<std::string> argv = {TestProgram("usdt_workload"), "--loop"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto child = ChildProcess::Start(argv);
    REQUIRE(child.ok());
    return std::move(*child);
  };
  SUBCASE("exit(3)") {
    auto child = start({"--finish", "exit:3"});
    ExitStatus x = EndAndCompare(agent, child);
    CHECK(x.exit_code == 3);
    CHECK(x.signal == 0);
    CHECK(x.Describe() == "exit status 3");
  }
  SUBCASE("a clean exit 0") {
    auto child = start({});
    ExitStatus x = EndAndCompare(agent, child);
    CHECK(x.exit_code == 0);
    CHECK(x.signal == 0);
  }
  SUBCASE("SIGKILL") {
    auto child = start({"--threads", "2"});
    ExitStatus x = EndAndCompare(agent, child, /*kill=*/true);
    CHECK(x.signal == SIGKILL);
    CHECK_FALSE(x.core_dumped);
    CHECK(x.Describe() == "killed by signal 9 (SIGKILL)");
  }
  SUBCASE("SIGSEGV, core dumps off") {
    auto child = start({"--finish", "raise:11"});
    ExitStatus x = EndAndCompare(agent, child);  // whether a core is dumped: as wait() says
    CHECK(x.signal == SIGSEGV);
  }
  SUBCASE("SIGSEGV with core dumps allowed (core bit as wait() reports it)") {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("seqpoint-core-" + std::to_string(getpid()));
    fs::create_directories(dir);
    auto child = start({"--threads", "3", "--finish", "raise:11", "--core-dir", dir.string()});
    ExitStatus x = EndAndCompare(agent, child);
    CHECK(x.signal == SIGSEGV);
    MESSAGE("core dumped: " << x.core_dumped << " (kernel.core_pattern decides)");
    fs::remove_all(dir);
  }
  SUBCASE("exit_group(5) from a thread other than main") {
    auto child = start({"--threads", "2", "--finish", "group-exit-from-thread:5"});
    ExitStatus x = EndAndCompare(agent, child);
    CHECK(x.exit_code == 5);
    CHECK(x.signal == 0);
  }
}

TEST_CASE("discovery: a process found by the /proc scan at start gets its exit status too") {
  if (!testing::CanUseBpf()) return;
  auto child = ChildProcess::Start({TestProgram("usdt_workload"), "--loop", "--finish", "exit:7"});
  REQUIRE(child.ok());
  // Started before the agent existed: no exec event; attached right after Start(), by the scan.
  Agent agent;
  REQUIRE(agent.probes->IsAttached(child->pid()));
  ExitStatus x = EndAndCompare(agent, *child);
  CHECK(x.exit_code == 7);
}

TEST_CASE("discovery: a process started after the agent is found at exec and detached at exit") {
  if (!testing::CanUseBpf()) return;
  DiscoveryOptions options;
  options.scan_at_start = false;
  Agent agent(options);
  auto child = ChildProcess::Start({TestProgram("usdt_workload"), "--loop"});
  REQUIRE(child.ok());
  CHECK(agent.WaitFor(child->pid(), 5));
  CHECK(agent.attacher->attached.count(child->pid()) == 1);
  StopAndCheckDetached(agent, *child);
  CHECK(agent.discovery->stats().execs >= 1);
}

TEST_CASE("discovery: a process already running is found by the scan at start") {
  if (!testing::CanUseBpf()) return;
  auto child = ChildProcess::Start({TestProgram("usdt_workload"), "--loop"});
  REQUIRE(child.ok());
  Agent agent;
  CHECK(agent.probes->IsAttached(child->pid()));
  CHECK(agent.WaitFor(child->pid(), 5));
  StopAndCheckDetached(agent, *child);
}

TEST_CASE("discovery: Python loading libseqpoint_usdt.so after exec is found via ld.so") {
  if (!testing::CanUseBpf()) return;
  DiscoveryOptions options;
  options.scan_at_start = false;
  Agent agent(options);
  std::string pythonpath = testing::BuildPath("sdk/python");
  // Starts, sleeps (the agent sees a plain python3 at exec), then imports the module, which
  // dlopens the library, and marks iterations until told to stop.
  const char* script =
      "import sys, time, select\n"
      "time.sleep(0.3)\n"
      "import seqpoint_probe\n"
      "assert seqpoint_probe.available()\n"
      "i = 0\n"
      "while not select.select([sys.stdin], [], [], 0)[0]:\n"
      "    with seqpoint_probe.iteration(seq_len=10 + i % 5, batch=2, tokens=7):\n"
      "        time.sleep(0.002)\n"
      "    i += 1\n";
  auto child =
      ChildProcess::Start({"/usr/bin/python3", "-c", script}, {"PYTHONPATH=" + pythonpath});
  REQUIRE(child.ok());
  CHECK(agent.WaitFor(child->pid(), 10));
  CHECK(agent.discovery->stats().library_loads >= 1);
  CHECK(agent.discovery->stats().linkers_hooked >= 1);
  for (const IterationEvent& e : agent.sink.EndsOf(child->pid())) {
    if (!e.complete()) continue;
    CHECK(e.seq_len == 10 + e.iter % 5);
    CHECK(e.batch == 2);
    CHECK(e.tokens == 7);
  }
  StopAndCheckDetached(agent, *child);
}

TEST_CASE("discovery: a watched process that loads a library is reported, once per burst") {
  if (!testing::CanUseBpf()) return;
  DiscoveryOptions options;
  options.scan_at_start = false;
  options.rescan_interval_s = 0;  // only the ld.so hook can tell
  Agent agent(options);
  // Marks iterations; on "load" it dlopens a library it never mapped (ctypes: the dynamic
  // linker's r_brk hook fires), on "stop" it exits.
  const std::string lib = testing::BuildPath("probes/testing/libseqpoint_mimic_rnn.so");
  const std::string script =
      "import sys, time, select, ctypes\n"
      "import seqpoint_probe\n"
      "i = 0\n"
      "while True:\n"
      "    if select.select([sys.stdin], [], [], 0)[0]:\n"
      "        line = sys.stdin.readline().strip()\n"
      "        if line != 'load': break\n"
      "        ctypes.CDLL('" +
      lib +
      "')\n"
      "    with seqpoint_probe.iteration(seq_len=8, batch=1, tokens=8):\n"
      "        time.sleep(0.002)\n"
      "    i += 1\n";
  auto child = ChildProcess::Start({"/usr/bin/python3", "-c", script},
                                   {"PYTHONPATH=" + testing::BuildPath("sdk/python")});
  REQUIRE(child.ok());
  const int pid = child->pid();
  REQUIRE(agent.WaitFor(pid, 5));
  // Settled: whatever the import's loads said has been said.
  for (int i = 0; i < 30; ++i) agent.Poll();
  const int before = agent.attacher->libraries_changed[pid];
  REQUIRE(child->WriteLine("load").ok());
  CHECK(PollUntil([&] { agent.Poll(); },
                  [&] { return agent.attacher->libraries_changed[pid] > before; }));
  MESSAGE("told " << agent.attacher->libraries_changed[pid] - before
                  << " time(s) after one dlopen");
  CHECK(agent.attacher->libraries_changed[pid] - before <= 2);  // a burst, debounced
  StopAndCheckDetached(agent, *child);
}

TEST_CASE("discovery: eight ranks at once, each traced and detached") {
  if (!testing::CanUseBpf()) return;
  DiscoveryOptions options;
  options.scan_at_start = false;
  Agent agent(options);
  std::vector<ChildProcess> ranks;
  for (int r = 0; r < 8; ++r) {
    auto child = ChildProcess::Start({TestProgram("usdt_workload"), "--loop", "--threads", "2",
                                      "--seq-lens", std::to_string(10 + r)});
    REQUIRE(child.ok());
    ranks.push_back(std::move(*child));
  }
  for (ChildProcess& rank : ranks) CHECK(agent.WaitFor(rank.pid(), 5));
  for (ChildProcess& rank : ranks) {
    CheckSeqLens(agent.sink, rank.pid(), uint32_t(10 + (&rank - ranks.data())));
  }
  for (ChildProcess& rank : ranks) StopAndCheckDetached(agent, rank);
  CHECK(agent.probes->AttachedPids().empty());
  CHECK(agent.probes->stats().lost() == 0);
}

TEST_CASE("discovery: a chrooted process is reached (maps shows the host path)") {
  if (!testing::CanUseBpf()) return;
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("seqpoint-chroot-" + std::to_string(getpid()));
  fs::create_directories(root / "app");
  fs::copy_file(TestProgram("usdt_workload_static"), root / "app" / "trainer",
                fs::copy_options::overwrite_existing);
  // The host has no /app/trainer: only /proc/PID/root/app/trainer reaches the binary.
  REQUIRE_FALSE(fs::exists("/app/trainer"));
  DiscoveryOptions options;
  options.scan_at_start = false;
  Agent agent(options);
  auto child = ChildProcess::Start(
      {"/usr/sbin/chroot", root.string(), "/app/trainer", "--loop", "--seq-lens", "77"});
  REQUIRE(child.ok());
  CHECK(agent.WaitFor(child->pid(), 5));
  CHECK(agent.probes->Describe(child->pid()).find("/app/trainer") != std::string::npos);
  CheckSeqLens(agent.sink, child->pid(), 77);
  StopAndCheckDetached(agent, *child);
  fs::remove_all(root);
}

TEST_CASE("discovery: a process in its own mount namespace, files invisible to the host") {
  if (!testing::CanUseBpf()) return;
  namespace fs = std::filesystem;
  // Like a container: a private mount namespace with a tmpfs only it can see, the binary copied
  // in there, then chroot. The host path of the binary does not exist; only the process's own
  // view (/proc/PID/root, /proc/PID/map_files) reaches it.
  fs::path mnt = fs::temp_directory_path() / ("seqpoint-ns-" + std::to_string(getpid()));
  fs::create_directories(mnt);
  std::string script = "mount -t tmpfs none " + mnt.string() + " && mkdir " + mnt.string() +
                       "/app && cp " + TestProgram("usdt_workload_static") + " " + mnt.string() +
                       "/app/trainer && exec /usr/sbin/chroot " + mnt.string() +
                       " /app/trainer --loop --seq-lens 91";
  DiscoveryOptions options;
  options.scan_at_start = false;
  Agent agent(options);
  auto child = ChildProcess::Start(
      {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script});
  REQUIRE(child.ok());
  CHECK(agent.WaitFor(child->pid(), 5));
  CHECK_FALSE(fs::exists(mnt / "app" / "trainer"));  // the host sees an empty directory
  CheckSeqLens(agent.sink, child->pid(), 91);
  StopAndCheckDetached(agent, *child);
  fs::remove(mnt);
}

// Issue 19: processes whose exit events a full ring dropped are reported in the order they
// ended, with their status, from the kernel's exit record. The ring is filled for real: this
// process loads and unloads a library thousands of times (each a record of the ld.so hook)
// while discovery is not polled; then the higher pid is killed and the other exits.
TEST_CASE("discovery: exits whose events were lost come in the order the processes ended") {
  if (!testing::CanUseBpf()) return;
  std::string library;
  for (const char* name : {"libresolv.so.2", "libanl.so.1", "libutil.so.1", "libz.so.1"}) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {  // loaded already: no record
      dlclose(h);
    } else if (void* h2 = dlopen(name, RTLD_NOW)) {
      dlclose(h2);
      library = name;
      break;
    }
  }
  if (library.empty()) {
    MESSAGE("skipped: no library to load and unload here");
    return;
  }
  const auto flood = [&] {
    for (int i = 0; i < 4000; ++i) {
      if (void* h = dlopen(library.c_str(), RTLD_NOW)) dlclose(h);
    }
  };
  DiscoveryOptions options;
  options.scan_at_start = false;
  options.liveness_interval_s = 0.2;
  Agent agent(options);
  auto a = ChildProcess::Start({TestProgram("usdt_workload"), "--loop"});
  auto b = ChildProcess::Start({TestProgram("usdt_workload"), "--loop"});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(agent.WaitFor(a->pid(), 3));
  REQUIRE(agent.WaitFor(b->pid(), 3));
  ChildProcess& first = a->pid() > b->pid() ? *a : *b;  // pid order is the wrong order
  ChildProcess& last = a->pid() > b->pid() ? *b : *a;
  const int killed = first.pid(), survivor = last.pid();
  flood();
  first.Kill();
  REQUIRE(first.WaitStatus().ok());
  usleep(20'000);
  REQUIRE(last.WriteLine("stop").ok());
  REQUIRE(last.WaitStatus().ok());
  flood();
  REQUIRE(
      PollUntil([&] { agent.Poll(); }, [&] { return agent.attacher->gone.count(survivor) > 0; }));
  REQUIRE(agent.discovery->stats().lost > 0);
  CHECK(agent.attacher->order == std::vector<int>{killed, survivor});
  REQUIRE(agent.attacher->exit_status.count(killed) == 1);
  REQUIRE(agent.attacher->exit_status.count(survivor) == 1);
  const ExitStatus& k = agent.attacher->exit_status[killed];
  const ExitStatus& s = agent.attacher->exit_status[survivor];
  CHECK(k.signal == SIGKILL);
  CHECK(s.exit_code == 0);
  CHECK(s.signal == 0);
  CHECK(k.time_ns < s.time_ns);
  CHECK(k.from_record);
  CHECK(s.from_record);
  CHECK(agent.discovery->stats().exits_from_record >= 2);
}

}  // namespace
}  // namespace seqpoint::probes
