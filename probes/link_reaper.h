// LinkReaper: closes the uprobe links of detached processes on a worker thread, so that their
// cost stays off the owner's event loop. Closing a uprobe link waits for the kernel to unregister
// it (80-110 ms each on the VMs we measured: an RCU grace period per link), so a process with
// three links held the daemon's loop for ~300 ms at its exit, and eight ranks exiting together
// for 2.4 s.
//
//   reaper.Add(pid, std::move(links));       // the owner: returns at once
//   { auto guard = reaper.Attaching(); ... }  // the owner, around libbpf attach calls
//   reaper.WaitFor(pid);                      // before registering the same pid again
//   reaper.TakeClosed();                      // pids whose links are all closed since
//
// Threads: one owner thread calls everything; the worker only destroys links. libbpf's USDT link
// gives its spec ids back to the bpf_object's USDT manager as it is destroyed, unlocked, while an
// attach takes them from there: the worker destroys a link only under the same lock the owner
// holds across its attach calls (Attaching), and yields to an owner waiting for it, so an attach
// waits for one link's close at most. The worker starts at the first Add; the destructor closes
// what is left and joins it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "probes/libbpf_util.h"

namespace seqpoint::probes {

class LinkReaper {
 public:
  struct Stats {
    uint64_t closed = 0;        // links destroyed
    uint64_t close_ns = 0;      // time spent destroying them (what the owner no longer waits)
    uint64_t max_batch_ns = 0;  // the longest one process's links took
  };

  LinkReaper() = default;
  ~LinkReaper();
  LinkReaper(const LinkReaper&) = delete;
  LinkReaper& operator=(const LinkReaper&) = delete;

  // Hands over the links of `pid` to be closed off this thread (inline if no thread can start).
  void Add(int pid, std::vector<LinkPtr> links);
  // Blocks until every link handed over for `pid` is closed.
  void WaitFor(int pid);
  // Blocks until every link handed over is closed.
  void Drain();
  // The pids whose links were all closed since the last call.
  std::vector<int> TakeClosed();
  bool Pending(int pid) const;
  Stats stats() const;

  // Held by the owner across libbpf attach calls of the same bpf_object (see the file comment).
  class AttachGuard {
   public:
    explicit AttachGuard(LinkReaper* reaper);
    ~AttachGuard();
    AttachGuard(const AttachGuard&) = delete;
    AttachGuard& operator=(const AttachGuard&) = delete;

   private:
    LinkReaper* reaper_;
  };
  AttachGuard Attaching() { return AttachGuard(this); }

 private:
  struct Batch {
    int pid = 0;
    std::vector<LinkPtr> links;
  };
  void Run();
  void Close(Batch* batch);  // destroys the links, one at a time under libbpf_mu_

  mutable std::mutex mu_;  // everything below but libbpf_mu_
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  std::map<int, int> pending_;  // pid -> batches queued or being closed
  std::vector<int> closed_;
  int owner_waiting_ = 0;  // owners waiting for libbpf_mu_: the worker lets them go first
  bool stop_ = false;
  Stats stats_;
  std::mutex libbpf_mu_;  // one libbpf call on the bpf_object at a time
  std::thread worker_;
};

}  // namespace seqpoint::probes
