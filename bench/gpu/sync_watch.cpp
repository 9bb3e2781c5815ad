// seqpoint-syncwatch: the CUDA syncs of one process, and whether each of its iteration windows
// was closed by one (collectors/gpu/sync_window.h), for bench/gpu/prove.sh.
//
//   seqpoint-syncwatch record PID OUT.csv [--poll-us N]
//       attaches the sync probes (probes/sync/sync_probes.h) once PID maps the CUDA runtime, then
//       until PID exits writes every new mark it sees, polling every N us (default 500):
//       "last_ns,count,function". Exit 0; 1 on an error (named).
//   seqpoint-syncwatch classify SYNCS.csv WINDOWS.csv [--bound-ms B] [--tail-ms T]
//       WINDOWS.csv has a header with "iter" and "end_mono_ns" (the trainer's CLOCK_MONOTONIC
//       iteration ends); replays the recorded marks through SyncWindow and prints one line per
//       window ("iter 12: closed by a sync, lag +3.1 ms" / "window not closed by a sync") and a
//       summary. The marks are what the daemon would have read, polled: a window's verdict is
//       the one the daemon would give at that poll period.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "collectors/gpu/sync_window.h"
#include "probes/sync/sync_probes.h"

namespace {

using seqpoint::collectors::SyncReading;
using seqpoint::collectors::SyncVerdict;
using seqpoint::collectors::SyncWindow;

int Usage() {
  std::fprintf(stderr,
               "usage: seqpoint-syncwatch record PID OUT.csv [--poll-us N]\n"
               "       seqpoint-syncwatch classify SYNCS.csv WINDOWS.csv [--bound-ms B] "
               "[--tail-ms T]\n");
  return 2;
}

bool Alive(int pid) { return kill(pid, 0) == 0 || errno == EPERM; }

int Record(int pid, const std::string& out_path, int poll_us) {
  auto probes = seqpoint::probes::SyncProbes::Create();
  if (!probes.ok()) {
    std::fprintf(stderr, "syncwatch: %s\n", probes.status().ToString().c_str());
    return 1;
  }
  std::ofstream out(out_path);
  if (!out) {
    std::fprintf(stderr, "syncwatch: cannot write %s\n", out_path.c_str());
    return 1;
  }
  out << "last_ns,count,function\n";
  // The runtime is loaded at `import torch` (libtorch_cuda needs libcudart): retry until then.
  while (Alive(pid)) {
    auto attached = (*probes)->AttachPid(pid);
    if (attached.ok()) {
      std::fprintf(stderr, "syncwatch: pid %d: %zu sync function(s) probed\n", pid,
                   attached->size());
      break;
    }
    if (attached.status().code() != seqpoint::ErrorCode::kNotFound) {
      std::fprintf(stderr, "syncwatch: %s\n", attached.status().ToString().c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  uint64_t seen = 0;
  while (Alive(pid)) {
    auto m = (*probes)->Mark(pid);
    if (m.ok() && m->count != seen) {
      seen = m->count;
      out << m->last_ns << "," << m->count << "," << m->function << "\n";
    }
    std::this_thread::sleep_for(std::chrono::microseconds(poll_us));
  }
  return 0;
}

std::vector<std::vector<std::string>> ReadCsv(const std::string& path,
                                              std::vector<std::string>* header) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CSVs written with \r\n (Python's default)
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    if (first) {
      *header = cells;
      first = false;
    } else if (!cells.empty()) {
      rows.push_back(cells);
    }
  }
  return rows;
}

int Column(const std::vector<std::string>& header, const std::string& name,
           const std::string& file) {
  auto it = std::find(header.begin(), header.end(), name);
  if (it == header.end()) {
    std::fprintf(stderr, "syncwatch: %s has no column '%s'\n", file.c_str(), name.c_str());
    std::exit(1);
  }
  return static_cast<int>(it - header.begin());
}

int Classify(const std::string& syncs_path, const std::string& windows_path,
             SyncWindow::Options o) {
  std::vector<std::string> sh, wh;
  auto syncs = ReadCsv(syncs_path, &sh);
  auto windows = ReadCsv(windows_path, &wh);
  const int s_ns = Column(sh, "last_ns", syncs_path), s_count = Column(sh, "count", syncs_path);
  const int w_iter = Column(wh, "iter", windows_path),
            w_end = Column(wh, "end_mono_ns", windows_path);
  std::vector<SyncReading> marks;
  for (const auto& r : syncs) marks.push_back({std::stoll(r.at(s_ns)), std::stoull(r.at(s_count))});
  int closed_at_end = 0, closed_next = 0, not_closed = 0;
  std::vector<double> lags_ms;
  size_t next = 0;  // first mark not yet before this window's end
  for (const auto& r : windows) {
    const int64_t end = std::stoll(r.at(w_end));
    SyncWindow w(o);
    w.EndCpu(end);
    // What the daemon's first check after the end would see: the latest mark at or before it,
    // then each later mark in order.
    while (next + 1 < marks.size() && marks[next + 1].last_ns <= end) ++next;
    SyncReading none{};
    const SyncReading& at_end = marks.empty() || marks[next].last_ns > end ? none : marks[next];
    SyncVerdict v = w.Check(end, at_end);
    for (size_t k = next; v == SyncVerdict::kWaiting && k < marks.size(); ++k) {
      if (marks[k].last_ns > end) v = w.Check(marks[k].last_ns, marks[k]);
    }
    if (v == SyncVerdict::kWaiting) v = w.Check(end + o.bound_ns + 1, at_end);
    if (v == SyncVerdict::kClosed) {
      (w.lag_ns() <= 0 ? closed_at_end : closed_next) += 1;
      lags_ms.push_back(static_cast<double>(w.lag_ns()) / 1e6);
      std::printf("   window iter %s: closed by a sync (%s), lag %+.3f ms\n", r.at(w_iter).c_str(),
                  w.lag_ns() <= 0 ? "in its tail" : "the next one",
                  static_cast<double>(w.lag_ns()) / 1e6);
    } else {
      ++not_closed;
      std::printf("   window iter %s: %s\n", r.at(w_iter).c_str(), w.why().c_str());
    }
  }
  std::sort(lags_ms.begin(), lags_ms.end());
  const double median = lags_ms.empty() ? 0 : lags_ms[lags_ms.size() / 2];
  const double max = lags_ms.empty() ? 0 : lags_ms.back();
  std::printf(
      "   sync-closed windows: %d at their end, %d at the next sync (lag median %+.3f ms, "
      "max %+.3f ms), %d NOT closed (GPU values left out) of %zu; %zu syncs recorded\n",
      closed_at_end, closed_next, median, max, not_closed, windows.size(), marks.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() >= 3 && args[0] == "record") {
    int poll_us = 500;
    if (args.size() == 5 && args[3] == "--poll-us") poll_us = std::atoi(args[4].c_str());
    return Record(std::atoi(args[1].c_str()), args[2], std::max(poll_us, 50));
  }
  if (args.size() >= 3 && args[0] == "classify") {
    SyncWindow::Options o;
    for (size_t i = 3; i + 1 < args.size(); i += 2) {
      if (args[i] == "--bound-ms")
        o.bound_ns = std::atoll(args[i + 1].c_str()) * 1'000'000;
      else if (args[i] == "--tail-ms")
        o.tail_ns = std::atoll(args[i + 1].c_str()) * 1'000'000;
      else
        return Usage();
    }
    return Classify(args[1], args[2], o);
  }
  return Usage();
}
