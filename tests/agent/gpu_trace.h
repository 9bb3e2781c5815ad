// The recorded trace (tests/data/agent/gru_debian_1500.csv) with GPU columns as NVML names
// them: the process's GPU memory (nvml:gpu0:proc_mem_used) and the GPU's capacity
// (nvml:gpu0:mem_total). No GPU was lent to this project's machines, so the memory column is a
// model on the real trace's SLs: 2 GiB of weights and optimiser state plus 96 MiB per SL token
// of activations, +-1% by iteration (the caching allocator's slack); SL, batch and time are the
// real trainer's. For the daemon's gauge tests (golden, gauge replay).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/testing/test_util.h"

namespace seqpoint::daemon::testing {

inline constexpr double kGpuTraceGiB = 1024.0 * 1024 * 1024;

inline double GpuTraceMemory(uint32_t seq_len, size_t row) {
  return 2 * kGpuTraceGiB +
         96.0 * 1024 * 1024 * seq_len * (1 + 0.01 * std::sin(static_cast<double>(row)));
}

struct GpuTrace {
  std::string path;
  double time_weighted_mean = 0;  // the memory over every row, weighted by time_ns
  double max_sl = 0;
};

// `capacity` 0: no capacity column (a driver that gives none).
inline GpuTrace WriteGpuTrace(const std::string& path, double capacity) {
  std::ifstream in(RecordedTrace());
  std::ofstream out(path);
  std::string line;
  bool header = false;
  int sl_col = -1, time_col = -1;
  size_t row = 0;
  double vt = 0, t = 0;
  GpuTrace g;
  g.path = path;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') {
      out << line << "\n";
      continue;
    }
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    if (!header) {
      header = true;
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i] == "seq_len") sl_col = static_cast<int>(i);
        if (cells[i] == "time_ns") time_col = static_cast<int>(i);
      }
      out << line << ",nvml:gpu0:proc_mem_used" << (capacity > 0 ? ",nvml:gpu0:mem_total" : "")
          << "\n";
      continue;
    }
    const uint32_t sl = static_cast<uint32_t>(std::stoul(cells[sl_col]));
    const double time = std::stod(cells[time_col]);
    const double mem = GpuTraceMemory(sl, row++);
    vt += mem * time;
    t += time;
    g.max_sl = std::max(g.max_sl, static_cast<double>(sl));
    char extra[96];
    if (capacity > 0) {
      std::snprintf(extra, sizeof extra, ",%.0f,%.0f", mem, capacity);
    } else {
      std::snprintf(extra, sizeof extra, ",%.0f", mem);
    }
    out << line << extra << "\n";
  }
  g.time_weighted_mean = t > 0 ? vt / t : 0;
  return g;
}

}  // namespace seqpoint::daemon::testing
