// Which devices a run's measured values came from: the GPUs (by UUID; "<uuid>/gi<G>/ci<C>" under
// MIG, the PCI bus id where NVML has no UUID), RAPL zones and "node" that `seqpoint show` and
// `seqpoint report` name, so a user can tell which GPU each value was read on. Read from the
// stored measurements (Measurement::device); rows stored before schema 9 did not record it and
// are counted, never guessed from the metric's name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/store/run_model.h"

namespace seqpoint::daemon {

struct MeasuredDevice {
  std::string device;
  std::vector<std::string> collectors;  // the metric names' first part ("nvml", "rapl", ...)
  uint64_t iterations = 0;              // measured iterations with a value from this device
  uint64_t values = 0;                  // measurement rows from this device
};

struct MeasuredDevices {
  std::vector<MeasuredDevice> devices;  // by device id
  // Rows of a store older than schema 9 (no device recorded): their device is unknown.
  uint64_t unrecorded = 0;
};

MeasuredDevices SummariseDevices(const std::vector<Measurement>& measurements);

}  // namespace seqpoint::daemon
