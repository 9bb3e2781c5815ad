// RingReader: a consumer of a BPF ring buffer (BPF_MAP_TYPE_RINGBUF) whose read position and
// the position it hands back to the kernel are apart. libbpf's ring_buffer frees each record's
// space as soon as its callback returns; here Commit() does, so a caller can keep the records
// it has read but not yet saved in the kernel until it has saved them. A ring pinned in bpffs
// keeps its consumer position, so a process that reopens it after a crash starts at the last
// commit and reads those records again (probes/probe_pins.h).
//
// The layout read here is the kernel's ABI (include/uapi/linux/bpf.h, kernel/bpf/ringbuf.c): a
// read-write page holding the consumer position, then a read-only page holding the producer
// position, then the data area mapped twice in a row (so a record never wraps); each record
// starts with an 8-byte header whose 32-bit length carries a BUSY bit (being written) and a
// DISCARD bit (dropped by the producer), and records are 8-byte aligned.
//
// Wakeups: the map fd is registered edge-triggered in the reader's own epoll fd. The kernel's
// poll says "readable" whenever producer != consumer, which stays true while records are
// read but not committed; edge-triggering reports each wakeup of the producer once instead.
//
// Threads: one owner thread; the producers are the BPF programs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "common/status.h"

namespace seqpoint::probes {

class RingReader {
 public:
  // `map_fd` is the ring buffer map's; it is duplicated (the caller keeps its own).
  static Result<std::unique_ptr<RingReader>> Open(int map_fd);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Calls `record(data, size)` for every record written since the read position (discarded ones
  // skipped) and moves the read position past them. Returns the number of records.
  int Read(const std::function<void(const void*, size_t)>& record);
  // Waits up to timeout_ms for a producer's wakeup (0: only collects a pending one). Returns
  // whether one came; EINTR counts as none.
  Result<bool> Wait(int timeout_ms);
  // Gives the space of every record read so far back to the producers.
  void Commit();

  // Readable while a producer's wakeup is pending (for an outer event loop).
  int epoll_fd() const { return epoll_fd_; }
  uint64_t size() const { return size_; }
  // Bytes read but not committed: what a crash of this process would have the next reader
  // read again.
  uint64_t uncommitted() const;
  // Bytes written and not yet read.
  uint64_t unread() const;

 private:
  RingReader() = default;
  int map_fd_ = -1;
  int epoll_fd_ = -1;
  uint64_t size_ = 0;  // data area; a power of two
  size_t page_ = 0;
  void* consumer_ = nullptr;  // page 0, read-write: the consumer position
  void* producer_ = nullptr;  // page 1 + data twice, read-only
  size_t producer_len_ = 0;
  const uint8_t* data_ = nullptr;
  uint64_t read_pos_ = 0;
};

}  // namespace seqpoint::probes
