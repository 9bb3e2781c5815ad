// Pinned iteration probes (probe_pins.h, iteration_probes_pins.cpp) on a real USDT workload: an
// owner that goes away leaves them attached and counting; the next owner adopts them (no second
// attach, no iteration twice, none missed) and what it removes is gone from bpffs and from the
// kernel. Needs root (skips with a message otherwise).
#include "probes/probe_pins.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "probes/iteration_probes.h"
#include "probes/testing/child_process.h"
#include "probes/testing/collecting_sink.h"

namespace seqpoint::probes {
namespace {

using testing::ChildProcess;
using testing::CollectingSink;
using testing::PollUntil;
using testing::TestProgram;

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

// A pin tree of this test process's own, removed at the end whatever happens.
struct PinRoot {
  std::string dir = "/sys/fs/bpf/seqpoint-test-" + std::to_string(getpid());
  std::string instance = "/tmp/probe-pins-test/state";
  ~PinRoot() { (void)RemovePinTree(dir); }
  IterationProbesOptions Options() const {
    IterationProbesOptions o;
    o.ring_buffer_bytes = 1u << 20;
    o.pin_dir = dir;
    o.pin_instance = instance;
    return o;
  }
};

std::unique_ptr<IterationProbes> Make(CollectingSink* sink, const IterationProbesOptions& o) {
  auto probes = IterationProbes::Create(o, sink);
  REQUIRE_MESSAGE(probes.ok(), probes.status().ToString());
  return std::move(*probes);
}

// Processes pinned under the test's instance, over all its generations.
size_t PinnedPidsOf(const PinRoot& root) {
  size_t n = 0;
  const std::string instance = InstancePinDir(root.dir, root.instance);
  DIR* d = opendir(instance.c_str());
  if (d == nullptr) return 0;
  while (dirent* g = readdir(d)) {
    if (g->d_name[0] == '.') continue;
    DIR* gd = opendir((instance + "/" + g->d_name).c_str());
    if (gd == nullptr) continue;
    while (dirent* e = readdir(gd)) n += std::strncmp(e->d_name, "pid_", 4) == 0;
    closedir(gd);
  }
  closedir(d);
  return n;
}

// Waits for the kernel to free programs whose last holder went (it does so asynchronously).
bool ProgramsBackTo(const std::set<uint32_t>& before) {
  return PollUntil([] { usleep(20 * 1000); },
                   [&] {
                     auto now = LoadedSeqpointProgramIds();
                     if (!now.ok()) return false;
                     for (uint32_t id : *now) {
                       if (before.count(id) == 0) return false;
                     }
                     return true;
                   },
                   10000);
}

// The iteration indices of `pid` in `sink`, checked complete and each delivered once.
std::set<uint64_t> Iters(const CollectingSink& sink, int pid) {
  std::set<uint64_t> iters;
  for (const IterationEvent& e : sink.EndsOf(pid)) {
    CHECK_MESSAGE(e.complete(), "iteration " << e.iter << " flags " << e.flags);
    CHECK_MESSAGE(iters.insert(e.iter).second, "iteration " << e.iter << " delivered twice");
  }
  return iters;
}

TEST_CASE("pin names: escaped and back, and a state dir maps to one instance directory") {
  CHECK(EscapePinName("usdt:/a/b%c.so") == "usdt:%2fa%2fb%25c%2eso");  // bpffs: no dots
  CHECK(UnescapePinName(EscapePinName("usdt:/a/b%c.so:end")) == "usdt:/a/b%c.so:end");
  CHECK(InstancePinDir("/sys/fs/bpf/seqpoint", "/var/lib/seqpoint") ==
        "/sys/fs/bpf/seqpoint/%2fvar%2flib%2fseqpoint");
  std::string longer(300, 'x');
  CHECK(InstancePinDir("/r", longer).size() < 40);  // hashed: a name must stay under NAME_MAX
}

TEST_CASE("pinned probes: a released owner's probes count on, the next adopts them exactly") {
  if (!testing::CanUseBpf()) return;
  PinRoot root;
  auto child = ChildProcess::Start({TestProgram("usdt_workload"), "--wait", "--loop", "--work-us",
                                    "200", "--loop-sleep-us", "300"});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  const int pid = child->pid();
  CollectingSink first_sink, second_sink;
  auto before = LoadedSeqpointProgramIds();
  REQUIRE(before.ok());
  {
    auto first = Make(&first_sink, root.Options());
    REQUIRE(first->pinned());
    auto attached = first->AttachPid(pid);
    REQUIRE_MESSAGE(attached.ok(), attached.status().ToString());
    REQUIRE(child->WriteLine("go").ok());
    REQUIRE(PollUntil([&] { REQUIRE(first->Poll(20).ok()); },
                      [&] { return first_sink.EndsOf(pid).size() >= 100; }));
    first->CommitDelivered();  // what an owner does once it has saved what it was given
    first->Release();
    CHECK(first->stats().pin_failures == 0);
  }
  // No owner: the workload goes on, the kernel keeps its records.
  usleep(300 * 1000);
  auto second = Make(&second_sink, root.Options());
  REQUIRE(second->carried_over().size() == 1);
  CHECK(second->carried_over()[0].identity.pid == pid);
  CHECK(second->carried_over()[0].alive);
  CHECK(second->IsAttached(pid));
  auto again = second->AttachPid(pid);  // what discovery does at start: adopted, not attached
  REQUIRE(again.ok());
  CHECK(*again == 0);
  const size_t had = second_sink.EndsOf(pid).size();
  REQUIRE(PollUntil([&] { REQUIRE(second->Poll(20).ok()); },
                    [&] { return second_sink.EndsOf(pid).size() >= had + 300; }));
  REQUIRE(child->WriteLine("stop").ok());
  REQUIRE(child->Wait().ok());
  second->DetachPid(pid);
  std::set<uint64_t> a = Iters(first_sink, pid), b = Iters(second_sink, pid);
  REQUIRE(!a.empty());
  REQUIRE(!b.empty());
  // The second owner starts exactly after the first's last iteration: none twice, none missed.
  // None missed: the second owner begins at or before the first's last (what the first
  // delivered after its last commit is given again: at least once).
  CHECK(*b.begin() <= *a.rbegin() + 1);
  CHECK(*b.rbegin() - *b.begin() + 1 == b.size());
  CHECK(*a.rbegin() - *a.begin() + 1 == a.size());
  // Detached: its pins are gone; with nothing attached the release removes the tree.
  CHECK(PinnedPidsOf(root) == 0);
  second->Release();
  CHECK(!Exists(InstancePinDir(root.dir, root.instance)));
  second.reset();
  CHECK(ProgramsBackTo(*before));
}

TEST_CASE("pinned probes: uncommitted records are given again, of a process gone meanwhile too") {
  if (!testing::CanUseBpf()) return;
  PinRoot root;
  auto child = ChildProcess::Start(
      {TestProgram("usdt_workload"), "--wait", "--iters", "400", "--work-us", "100", "--hold"});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  const int pid = child->pid();
  CollectingSink first_sink, second_sink;
  {
    auto first = Make(&first_sink, root.Options());
    REQUIRE(first->AttachPid(pid).ok());
    REQUIRE(child->WriteLine("go").ok());
    REQUIRE(PollUntil([&] { REQUIRE(first->Poll(20).ok()); },
                      [&] { return first_sink.EndsOf(pid).size() >= 50; }));
    // Killed before saving: nothing committed (the destructor of a released owner does no more).
    first->Release();
  }
  REQUIRE(child->ReadLine().ok());  // "done 400": every iteration fired while no owner ran
  REQUIRE(child->WriteLine("exit").ok());
  REQUIRE(child->Wait().ok());
  auto second = Make(&second_sink, root.Options());
  REQUIRE(second->carried_over().size() == 1);
  CHECK(!second->carried_over()[0].alive);
  REQUIRE(second->Poll(0).ok());
  second->DetachPid(pid);  // what the daemon does with a carried process that is gone
  std::set<uint64_t> b = Iters(second_sink, pid);
  CHECK(b.size() ==
        400);  // all of them: the first owner's 50+ uncommitted ones again, and the rest
  CHECK(PinnedPidsOf(root) == 0);
}

TEST_CASE("pinned probes: an owner of another generation drains the old one and takes over") {
  if (!testing::CanUseBpf()) return;
  PinRoot root;
  auto child = ChildProcess::Start({TestProgram("usdt_workload"), "--wait", "--loop", "--work-us",
                                    "200", "--loop-sleep-us", "300"});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  const int pid = child->pid();
  CollectingSink first_sink, second_sink;
  {
    auto first = Make(&first_sink, root.Options());
    REQUIRE(first->AttachPid(pid).ok());
    REQUIRE(child->WriteLine("go").ok());
    REQUIRE(PollUntil([&] { REQUIRE(first->Poll(20).ok()); },
                      [&] { return first_sink.EndsOf(pid).size() >= 100; }));
    first->CommitDelivered();
    first->Release();
  }
  usleep(300 * 1000);
  IterationProbesOptions upgraded = root.Options();
  upgraded.ring_buffer_bytes = 2u << 20;  // another generation: its maps cannot be reused
  auto second = Make(&second_sink, upgraded);
  REQUIRE(second->carried_over().size() == 1);
  CHECK(second->carried_over()[0].alive);
  CHECK(!second->IsAttached(pid));  // kept on its old probes until attached afresh
  REQUIRE(second->Poll(0).ok());    // the old ring: what came while no owner ran
  REQUIRE(second->AttachPid(pid).ok());
  const size_t had = second_sink.EndsOf(pid).size();
  REQUIRE(PollUntil([&] { REQUIRE(second->Poll(20).ok()); },
                    [&] { return second_sink.EndsOf(pid).size() >= had + 300; }));
  REQUIRE(child->WriteLine("stop").ok());
  REQUIRE(child->Wait().ok());
  second->DetachPid(pid);
  std::set<uint64_t> a = Iters(first_sink, pid);
  std::set<uint64_t> b;
  size_t twice = 0;
  for (const IterationEvent& e : second_sink.EndsOf(pid)) {
    CHECK_MESSAGE(e.complete(), "iteration " << e.iter << " flags " << e.flags);
    twice += !b.insert(e.iter).second;
  }
  CHECK(twice == 0);  // an end both generations saw is delivered once
  // None missed: the second owner begins at or before the first's last (what the first
  // delivered after its last commit is given again: at least once).
  CHECK(*b.begin() <= *a.rbegin() + 1);
  CHECK(*b.rbegin() - *b.begin() + 1 == b.size());  // none missed across the switch
  // The old generation is gone once its process was taken over.
  size_t generations = 0;
  DIR* d = opendir(InstancePinDir(root.dir, root.instance).c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) generations += e->d_name[0] != '.';
  closedir(d);
  CHECK(generations == 1);
}

TEST_CASE("pinned probes: RemovePins detaches what an owner left (seqpointd --unpin)") {
  if (!testing::CanUseBpf()) return;
  PinRoot root;
  auto child = ChildProcess::Start({TestProgram("usdt_workload"), "--wait", "--loop"});
  REQUIRE(child.ok());
  REQUIRE(child->ReadLine().ok());
  CollectingSink sink;
  auto before = LoadedSeqpointProgramIds();
  REQUIRE(before.ok());
  {
    auto owner = Make(&sink, root.Options());
    REQUIRE(owner->AttachPid(child->pid()).ok());
    owner->Release();
  }
  auto left = LoadedSeqpointProgramIds();
  REQUIRE(left.ok());
  CHECK(left->size() > before->size());  // still attached, held by the pins
  auto removed = IterationProbes::RemovePins(root.dir, root.instance);
  REQUIRE_MESSAGE(removed.ok(), removed.status().ToString());
  CHECK(*removed >= 3);  // the maps and at least the two USDT links
  CHECK(!Exists(InstancePinDir(root.dir, root.instance)));
  CHECK(ProgramsBackTo(*before));  // detached: nothing holds the programs any more
}

}  // namespace
}  // namespace seqpoint::probes

namespace seqpoint::probes {
namespace {

// A real pin (a small BPF map) at `path`, its directories made first.
void PinAMap(const std::string& path) {
  std::string dir = path.substr(0, path.rfind('/'));
  for (size_t at = 1; at != std::string::npos; at = dir.find('/', at + 1)) {
    mkdir(dir.substr(0, at).c_str(), 0700);
  }
  mkdir(dir.c_str(), 0700);
  int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "sp_sweep_test", 4, 8, 1, nullptr);
  REQUIRE(fd >= 0);
  REQUIRE(bpf_obj_pin(fd, path.c_str()) == 0);
  close(fd);
}

TEST_CASE("pinned probes: at start, the trees of daemons that cannot come back are swept") {
  if (!testing::CanUseBpf()) return;
  PinRoot root;
  char tmpl[] = "/tmp/sp-sweep-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string base = tmpl;
  const std::string live = base + "/live", no_db = base + "/no-db", gone = base + "/gone";
  mkdir(live.c_str(), 0700);
  mkdir(no_db.c_str(), 0700);
  FILE* db = std::fopen((live + "/state.db").c_str(), "w");
  REQUIRE(db != nullptr);
  std::fclose(db);
  for (const std::string& s : {live, no_db, gone}) {
    PinAMap(InstancePinDir(root.dir, s) + "/0123456789abcdef/map_events");
  }
  CollectingSink sink;
  auto probes = Make(&sink, root.Options());  // sweeps at Create
  std::map<std::string, std::string> swept;
  for (const SweptInstance& s : probes->swept_orphans()) {
    swept[s.state_dir] = s.why;
    CHECK(s.pins == 1);
  }
  CHECK(swept.size() == 2);
  CHECK(swept[gone].find("no longer exists") != std::string::npos);
  CHECK(swept[no_db].find("not a seqpointd's") != std::string::npos);
  CHECK_FALSE(Exists(InstancePinDir(root.dir, gone)));
  CHECK_FALSE(Exists(InstancePinDir(root.dir, no_db)));
  CHECK(Exists(InstancePinDir(root.dir, live) + "/0123456789abcdef/map_events"));  // kept
  CHECK(Exists(InstancePinDir(root.dir, root.instance)));                          // its own
  probes.reset();
  std::remove((live + "/state.db").c_str());
  rmdir(live.c_str());
  rmdir(no_db.c_str());
  rmdir(base.c_str());
}

}  // namespace
}  // namespace seqpoint::probes
