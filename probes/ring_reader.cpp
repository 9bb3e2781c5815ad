// See ring_reader.h.
#include "probes/ring_reader.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "probes/libbpf_util.h"

namespace seqpoint::probes {
namespace {

uint64_t LoadAcquire(const void* p) {
  return __atomic_load_n(static_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
}

// The space a record of header length `len` takes: header included, 8-byte aligned.
uint64_t RecordSpan(uint32_t len) {
  len &= ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
  return (static_cast<uint64_t>(len) + BPF_RINGBUF_HDR_SZ + 7) / 8 * 8;
}

}  // namespace

Result<std::unique_ptr<RingReader>> RingReader::Open(int map_fd) {
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(map_fd, &info, &len) != 0) {
    return LibbpfError("reading the ring buffer map's info", errno);
  }
  if (info.type != BPF_MAP_TYPE_RINGBUF) {
    return InvalidArgument("map '" + std::string(info.name) + "' is not a BPF ring buffer");
  }
  std::unique_ptr<RingReader> r(new RingReader());
  r->map_fd_ = dup(map_fd);
  if (r->map_fd_ < 0) return LibbpfError("duplicating the ring buffer fd", errno);
  r->page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  r->size_ = info.max_entries;
  void* c = mmap(nullptr, r->page_, PROT_READ | PROT_WRITE, MAP_SHARED, r->map_fd_, 0);
  if (c == MAP_FAILED) return LibbpfError("mapping the ring buffer's consumer page", errno);
  r->consumer_ = c;
  r->producer_len_ = r->page_ + 2 * r->size_;
  void* p = mmap(nullptr, r->producer_len_, PROT_READ, MAP_SHARED, r->map_fd_,
                 static_cast<off_t>(r->page_));
  if (p == MAP_FAILED) return LibbpfError("mapping the ring buffer's data", errno);
  r->producer_ = p;
  r->data_ = static_cast<const uint8_t*>(p) + r->page_;
  r->read_pos_ = LoadAcquire(r->consumer_);
  r->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (r->epoll_fd_ < 0) return LibbpfError("creating an epoll fd for the ring buffer", errno);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  if (epoll_ctl(r->epoll_fd_, EPOLL_CTL_ADD, r->map_fd_, &ev) != 0) {
    return LibbpfError("watching the ring buffer", errno);
  }
  return r;
}

RingReader::~RingReader() {
  if (producer_ != nullptr) munmap(producer_, producer_len_);
  if (consumer_ != nullptr) munmap(consumer_, page_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (map_fd_ >= 0) close(map_fd_);
}

int RingReader::Read(const std::function<void(const void*, size_t)>& record) {
  int n = 0;
  for (;;) {
    const uint64_t prod = LoadAcquire(producer_);
    if (read_pos_ >= prod) break;
    while (read_pos_ < prod) {
      const uint8_t* hdr = data_ + (read_pos_ & (size_ - 1));
      const uint32_t len =
          __atomic_load_n(reinterpret_cast<const uint32_t*>(hdr), __ATOMIC_ACQUIRE);
      if (len & BPF_RINGBUF_BUSY_BIT) return n;  // still being written: the next Read gets it
      read_pos_ += RecordSpan(len);
      if ((len & BPF_RINGBUF_DISCARD_BIT) == 0) {
        record(hdr + BPF_RINGBUF_HDR_SZ, len);
        ++n;
      }
    }
  }
  return n;
}

Result<bool> RingReader::Wait(int timeout_ms) {
  epoll_event ev{};
  int n = epoll_wait(epoll_fd_, &ev, 1, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return false;
    return LibbpfError("waiting on the ring buffer", errno);
  }
  return n > 0;
}

void RingReader::Commit() {
  __atomic_store_n(static_cast<uint64_t*>(consumer_), read_pos_, __ATOMIC_RELEASE);
}

uint64_t RingReader::uncommitted() const { return read_pos_ - LoadAcquire(consumer_); }

uint64_t RingReader::unread() const {
  const uint64_t prod = LoadAcquire(producer_);
  return prod > read_pos_ ? prod - read_pos_ : 0;
}

}  // namespace seqpoint::probes
