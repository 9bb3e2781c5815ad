// See link_reaper.h.
#include "probes/link_reaper.h"

#include <algorithm>
#include <system_error>
#include <utility>

#include "common/clock.h"

namespace seqpoint::probes {

LinkReaper::~LinkReaper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();  // it closes what is queued before it returns
}

void LinkReaper::Add(int pid, std::vector<LinkPtr> links) {
  if (links.empty()) return;
  Batch batch{pid, std::move(links)};
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++pending_[pid];
    if (!worker_.joinable()) {
      try {
        worker_ = std::thread([this] { Run(); });
      } catch (const std::system_error&) {
        // No thread (resource limits): close here, as before the reaper existed.
      }
    }
    if (worker_.joinable()) {
      queue_.push_back(std::move(batch));
      cv_.notify_all();
      return;
    }
  }
  Close(&batch);
}

void LinkReaper::WaitFor(int pid) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_.count(pid) == 0; });
}

void LinkReaper::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_.empty(); });
}

std::vector<int> LinkReaper::TakeClosed() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  out.swap(closed_);
  return out;
}

bool LinkReaper::Pending(int pid) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.count(pid) != 0;
}

LinkReaper::Stats LinkReaper::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void LinkReaper::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    Batch batch = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Close(&batch);
    lock.lock();
  }
}

void LinkReaper::Close(Batch* batch) {
  const uint64_t start = KernelMonotonicNs();
  const uint64_t count = batch->links.size();
  for (LinkPtr& link : batch->links) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return owner_waiting_ == 0; });
    }
    std::lock_guard<std::mutex> libbpf(libbpf_mu_);
    link.reset();
  }
  const uint64_t took = KernelMonotonicNs() - start;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.closed += count;
    stats_.close_ns += took;
    stats_.max_batch_ns = std::max(stats_.max_batch_ns, took);
    auto it = pending_.find(batch->pid);
    if (it != pending_.end() && --it->second == 0) {
      pending_.erase(it);
      closed_.push_back(batch->pid);
    }
  }
  cv_.notify_all();
}

LinkReaper::AttachGuard::AttachGuard(LinkReaper* reaper) : reaper_(reaper) {
  {
    std::lock_guard<std::mutex> lock(reaper_->mu_);
    ++reaper_->owner_waiting_;
  }
  reaper_->libbpf_mu_.lock();
}

LinkReaper::AttachGuard::~AttachGuard() {
  reaper_->libbpf_mu_.unlock();
  {
    std::lock_guard<std::mutex> lock(reaper_->mu_);
    --reaper_->owner_waiting_;
  }
  reaper_->cv_.notify_all();
}

}  // namespace seqpoint::probes
