#include "collectors/collector_set.h"

#include <chrono>
#include <exception>
#include <utility>

namespace seqpoint::collectors {
namespace {

double NowUs() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

// Runs fn(), turning an escaping exception into an internal error naming the collector.
template <typename Fn>
auto Guarded(std::string_view collector, std::string_view call, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return Internal("collector " + std::string(collector) + " threw from " + std::string(call) +
                    ": " + e.what());
  } catch (...) {
    return Internal("collector " + std::string(collector) + " threw from " + std::string(call));
  }
}

}  // namespace

std::string_view SampleScopeName(SampleScope scope) {
  return scope == SampleScope::kDevice ? "device" : "process";
}

std::string_view SampleKindName(SampleKind kind) {
  return kind == SampleKind::kGauge ? "gauge" : "delta";
}

void InferScopeAndKind(Sample& sample) {
  const std::string& n = sample.name;
  const std::string& u = sample.unit;
  sample.kind = (u == "W" || u == "MHz" || u == "C" || u == "%" || u == "ratio" || u == "bytes" ||
                 u == "value")
                    ? SampleKind::kGauge
                    : SampleKind::kDelta;
  sample.scope = SampleScope::kProcess;
  sample.device.clear();
  if (n == "energy_uj") {
    sample.scope = SampleScope::kDevice;
    sample.device = "node";
    return;
  }
  for (std::string_view gpu : {std::string_view("nvml:"), std::string_view("rocm_smi:")}) {
    // "<collector>:<device>:<event>": the device part is the collector's GPU index.
    if (n.compare(0, gpu.size(), gpu) != 0) continue;
    const size_t end = n.find(':', gpu.size());
    if (end == std::string::npos) return;
    sample.scope = SampleScope::kDevice;
    sample.device = n.substr(0, end);
    return;
  }
  if (n.rfind("rapl:", 0) == 0) {
    sample.scope = SampleScope::kDevice;
    sample.device = n;
  }
}

std::string_view CollectorStateName(CollectorState state) {
  switch (state) {
    case CollectorState::kClosed:
      return "closed";
    case CollectorState::kOpen:
      return "open";
    case CollectorState::kAbsent:
      return "absent";
    case CollectorState::kFailed:
      return "failed";
  }
  return "unknown";
}

void CollectorSet::Add(std::unique_ptr<Collector> collector) {
  CollectorStats st;
  st.name = std::string(collector->name());
  stats_.push_back(std::move(st));
  entries_.push_back({std::move(collector), Status::Ok(), 0});
}

void CollectorSet::Open(const Target& target) {
  Close();
  for (size_t i = 0; i < entries_.size(); ++i) {
    Collector& c = *entries_[i].collector;
    CollectorStats& st = stats_[i];
    entries_[i].begun = false;
    Status s = Guarded(st.name, "Open", [&] { return c.Open(target); });
    st.open_status = s;
    if (s.ok()) {
      st.state = CollectorState::kOpen;
      st.description = c.Describe();
    } else {
      st.state = IsAbsent(s) ? CollectorState::kAbsent : CollectorState::kFailed;
      st.description.clear();
    }
  }
}

void CollectorSet::Begin(uint64_t visit) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (stats_[i].state != CollectorState::kOpen) continue;
    const double t0 = NowUs();
    e.begin_status = Guarded(stats_[i].name, "Begin", [&]() -> Status {
      const size_t groups = e.collector->group_count();
      if (groups > 1) {
        SEQPOINT_RETURN_IF_ERROR(e.collector->SelectGroup(static_cast<size_t>(visit % groups)));
      }
      return e.collector->Begin();
    });
    e.begin_cost_us = NowUs() - t0;
    e.begun = true;
  }
}

std::vector<CollectorReading> CollectorSet::End() {
  return EndSome([](std::string_view) { return true; }, /*begun_only=*/false);
}

std::vector<CollectorReading> CollectorSet::End(
    const std::function<bool(std::string_view)>& which) {
  return EndSome(which, /*begun_only=*/true);
}

bool CollectorSet::Measuring(const std::function<bool(std::string_view)>& which) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (stats_[i].state == CollectorState::kOpen && entries_[i].begun && which(stats_[i].name)) {
      return true;
    }
  }
  return false;
}

std::vector<CollectorReading> CollectorSet::EndSome(
    const std::function<bool(std::string_view)>& which, bool begun_only) {
  std::vector<CollectorReading> readings;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    CollectorStats& st = stats_[i];
    if (st.state != CollectorState::kOpen || !which(st.name)) continue;
    // Ended already (a GPU collector ended apart from the others): no second reading.
    if (begun_only && !e.begun) continue;
    e.begun = false;
    CollectorReading r;
    r.collector = st.name;
    r.group = e.collector->current_group();
    r.group_count = e.collector->group_count();
    const double t0 = NowUs();
    if (!e.begin_status.ok()) {
      r.status = e.begin_status;
    } else {
      Result<std::vector<Sample>> samples = Guarded(
          st.name, "End", [&]() -> Result<std::vector<Sample>> { return e.collector->End(); });
      if (samples.ok()) {
        r.samples = std::move(samples).value();
      } else {
        r.status = samples.status();
      }
    }
    st.last_cost_us = e.begin_cost_us + (NowUs() - t0);
    st.total_cost_us += st.last_cost_us;
    st.last_status = r.status;
    st.last_warnings = e.collector->warnings();
    st.description = e.collector->Describe();  // what it measures now (GPUs found after Open)
    (r.status.ok() ? st.measurements_ok : st.measurements_failed)++;
    e.begin_status = Unavailable("End() called without Begin()");
    readings.push_back(std::move(r));
  }
  return readings;
}

void CollectorSet::Close() {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (stats_[i].state == CollectorState::kOpen) {
      try {
        entries_[i].collector->Close();
      } catch (...) {
        // Close must not fail the agent; the collector is closed from our point of view.
      }
      stats_[i].state = CollectorState::kClosed;
    }
  }
}

size_t CollectorSet::open_count() const {
  size_t n = 0;
  for (const CollectorStats& st : stats_) n += st.state == CollectorState::kOpen;
  return n;
}

}  // namespace seqpoint::collectors
