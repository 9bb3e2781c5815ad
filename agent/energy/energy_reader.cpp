#include "agent/energy/energy_reader.h"

#include <time.h>

#include <utility>

#include "collectors/energy/update_period.h"

namespace seqpoint::daemon {

uint64_t MonotonicNowNs() {
  // Not through common/clock.h: the samples are matched against the probes' own
  // CLOCK_MONOTONIC stamps (tests inject the sampler's clock instead).
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

EnergyReader::~EnergyReader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();  // at most one read (or calibration read) to finish
}

Status EnergyReader::Open() {
  if (!source_) return InvalidArgument("energy reader: no source");
  SEQPOINT_RETURN_IF_ERROR(source_->Open());
  name_ = std::string(source_->name());
  description_ = source_->Describe();
  return Status::Ok();
}

void EnergyReader::Start(bool own_thread) {
  own_thread_ = own_thread;
  if (!own_thread) {
    Calibrate();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    calibrating_ = true;
  }
  thread_ = std::thread([this] { Run(); });
}

EnergyRead EnergyReader::ReadOnce() {
  EnergyRead r;
  r.t0_ns = clock_();
  Result<double> uj = source_->ReadMicrojoules();
  r.t1_ns = clock_();
  if (r.t1_ns < r.t0_ns) r.t1_ns = r.t0_ns;
  r.ok = uj.ok();
  if (r.ok) {
    r.uj = *uj;
  } else {
    r.error = uj.status().message();
  }
  return r;
}

void EnergyReader::Calibrate() {
  EnergyRead last;          // the last read (or the failure that ended the measurement)
  bool last_taken = false;  // it already answered a Request
  uint64_t busy = 0;
  collectors::MeasureOptions options;
  // On the caller's thread, tests and benches step an injected clock: no real time to space.
  options.spacing_ns = own_thread_ ? kCalibrationSpacingNs : 0;
  options.stop = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  };
  const collectors::UpdatePeriod p = collectors::MeasureUpdatePeriod(
      [&]() -> Result<collectors::CounterRead> {
        last = ReadOnce();
        busy += last.t1_ns - last.t0_ns;
        {
          // Sampling goes on while the period is measured (half a second for NVML's 100 ms
          // counter, up to the 2 s cap): a read answers the Request made before it ended. Held
          // by Take until the period is known, which places it.
          std::lock_guard<std::mutex> lock(mu_);
          last_taken = std::exchange(requested_, false);
          if (last_taken) done_.push_back(last);
        }
        if (!last.ok) return Unavailable(last.error);
        return collectors::CounterRead{static_cast<int64_t>(last.t0_ns),
                                       static_cast<int64_t>(last.t1_ns), last.uj};
      },
      options);
  EnergyCalibration c;
  // The period of on-time reads; else a bound from every change seen; else (fewer than two
  // changes) the span: the counter held one value about that long.
  if (p.period_ns) {
    c.update_ns = static_cast<uint64_t>(*p.period_ns);
    c.upper_bound = p.upper_bound;
  } else if (p.changes_bound_ns) {
    c.update_ns = static_cast<uint64_t>(*p.changes_bound_ns);
    c.upper_bound = true;
  } else {
    c.update_ns = static_cast<uint64_t>(p.spent_ns);
  }
  c.reads = static_cast<uint64_t>(p.reads);
  c.changes = static_cast<uint64_t>(p.changes);
  c.gaps = static_cast<uint64_t>(p.gaps);
  c.read_ns = c.reads > 0 ? busy / c.reads : 0;
  c.done = true;
  std::lock_guard<std::mutex> lock(mu_);
  calibration_ = c;
  calibrating_ = false;
  read_ns_ += busy;
  // The last read is a sample too, so the first iteration has a start.
  if (c.reads > 0 && !last_taken) done_.push_back(std::move(last));
}

void EnergyReader::Run() {
  Calibrate();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || requested_; });
    if (stop_) return;
    requested_ = false;
    in_flight_ = true;
    lock.unlock();
    EnergyRead r = ReadOnce();
    lock.lock();
    in_flight_ = false;
    Publish(r);
  }
}

void EnergyReader::Publish(const EnergyRead& r) {
  read_ns_ += r.t1_ns - r.t0_ns;
  done_.push_back(r);
}

bool EnergyReader::Request() {
  if (!own_thread_) {
    EnergyRead r = ReadOnce();
    std::lock_guard<std::mutex> lock(mu_);
    Publish(r);
    return true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_ || requested_) return false;
    requested_ = true;
  }
  cv_.notify_one();
  return true;
}

std::vector<EnergyRead> EnergyReader::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (calibrating_) return {};  // a read is placed by the period, not measured yet
  return std::exchange(done_, {});
}

EnergyCalibration EnergyReader::calibration() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calibration_;
}

uint64_t EnergyReader::read_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return read_ns_;
}

}  // namespace seqpoint::daemon
