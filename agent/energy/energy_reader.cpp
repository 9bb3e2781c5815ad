#include "agent/energy/energy_reader.h"

#include <time.h>

#include <utility>

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
  EnergyCalibration c;
  EnergyRead first = ReadOnce(), last = first;
  uint64_t busy = first.t1_ns - first.t0_ns;
  uint64_t first_change = 0, last_change = 0;
  c.reads = 1;
  while (last.ok && c.changes < kCalibrationChanges && c.reads < kCalibrationReads &&
         last.t1_ns - first.t0_ns < kCalibrationNs) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
    }
    EnergyRead r = ReadOnce();
    ++c.reads;
    busy += r.t1_ns - r.t0_ns;
    if (r.ok && r.uj != last.uj) {
      const uint64_t at = r.t0_ns + (r.t1_ns - r.t0_ns) / 2;
      if (c.changes++ == 0) first_change = at;
      last_change = at;
    }
    last = std::move(r);
  }
  // Two changes or more: the mean spacing of changes. Fewer: the counter held one value for
  // about the whole calibration, so its period is at least that long.
  c.update_ns =
      c.changes >= 2 ? (last_change - first_change) / (c.changes - 1) : last.t1_ns - first.t0_ns;
  c.read_ns = busy / c.reads;
  c.done = true;
  std::lock_guard<std::mutex> lock(mu_);
  calibration_ = c;
  calibrating_ = false;
  read_ns_ += busy;
  done_.push_back(std::move(last));  // the first sample, so the first iteration has a start
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
    if (calibrating_) return true;  // its last read is the next sample
    if (in_flight_ || requested_) return false;
    requested_ = true;
  }
  cv_.notify_one();
  return true;
}

std::vector<EnergyRead> EnergyReader::Take() {
  std::lock_guard<std::mutex> lock(mu_);
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
