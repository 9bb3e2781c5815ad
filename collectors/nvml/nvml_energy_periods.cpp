#include "collectors/nvml/nvml_energy_periods.h"

#include "collectors/collector_config.h"
#include "common/clock.h"

namespace seqpoint::collectors {

std::shared_ptr<NvmlEnergyPeriods> MakeNvmlEnergyPeriods() {
  return std::make_shared<NvmlEnergyPeriods>();
}

NvmlEnergyPeriods::~NvmlEnergyPeriods() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  for (auto& [id, e] : entries_) {
    if (e.thread.joinable()) e.thread.join();  // its current read, then MeasureOptions::stop
  }
}

void NvmlEnergyPeriods::Start(std::shared_ptr<const NvmlLibrary> nvml, const NvmlDevice& d) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return;
  Entry& e = entries_[d.id()];
  if (e.running) return;
  if (e.result) {
    const bool retry = !e.result->period_ns &&
                       e.result->read_error.code() != ErrorCode::kUnsupported &&
                       std::chrono::steady_clock::now() - e.finished >= kRetryAfter;
    if (!retry) return;
  }
  if (e.thread.joinable()) e.thread.join();  // finished: it only publishes, under mu_, then ends
  e.running = true;
  ++started_;
  e.thread =
      std::thread([this, nvml = std::move(nvml), d]() mutable { Measure(std::move(nvml), d); });
}

void NvmlEnergyPeriods::Measure(std::shared_ptr<const NvmlLibrary> nvml, NvmlDevice d) {
  MeasureOptions options;
  options.spacing_ns = kSpacingNs;
  options.stop = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  };
  UpdatePeriod p = MeasureUpdatePeriod(
      [&]() -> Result<CounterRead> {
        CounterRead r;
        r.t0_ns = MonotonicNs();
        Result<uint64_t> mj = nvml->TotalEnergyMillijoules(d);
        r.t1_ns = MonotonicNs();
        if (!mj.ok()) return mj.status();
        r.value = static_cast<double>(*mj);
        return r;
      },
      options);
  nvml.reset();  // the library may close now (a test's next Open reloads the double afresh)
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[d.id()];
    e.result = std::move(p);
    e.running = false;
    e.finished = std::chrono::steady_clock::now();
  }
  cv_.notify_all();
}

std::optional<UpdatePeriod> NvmlEnergyPeriods::Get(const std::string& gpu_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(gpu_id);
  if (it == entries_.end() || it->second.running) return std::nullopt;
  return it->second.result;
}

bool NvmlEnergyPeriods::WaitIdle(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] {
    for (const auto& [id, e] : entries_) {
      if (e.running) return false;
    }
    return true;
  });
}

int NvmlEnergyPeriods::started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_;
}

}  // namespace seqpoint::collectors
