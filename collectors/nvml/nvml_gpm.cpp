// See nvml_gpm.h. Metric ids and the DCGM field each one feeds: DCGM's
// DcgmFieldIdToNvmlGpmMetricId (1001 gr_engine_active <- 1, 1002 sm_active <- 2,
// 1003 sm_occupancy <- 3, 1004 tensor_active <- 5, 1005 dram_active <- 10, 1006 fp64 <- 11,
// 1007 fp32 <- 12, 1008 fp16 <- 13, 1009/1010 PCIe tx/rx <- 20/21, 1011/1012 NVLink tx/rx <-
// 61/60).
#include "collectors/nvml/nvml_gpm.h"

#include <algorithm>
#include <utility>

namespace seqpoint::collectors {
namespace {

struct Metric {
  unsigned id;
  const char* name;
  bool bytes;  // MiB/s -> bytes over the window (a delta); else % -> ratio (a gauge)
};

constexpr Metric kMetrics[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, "gr_engine_active", false},
    {NVML_GPM_METRIC_SM_UTIL, "sm_active", false},
    {NVML_GPM_METRIC_SM_OCCUPANCY, "sm_occupancy", false},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, "tensor_active", false},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, "dram_active", false},
    {NVML_GPM_METRIC_FP64_UTIL, "fp64_active", false},
    {NVML_GPM_METRIC_FP32_UTIL, "fp32_active", false},
    {NVML_GPM_METRIC_FP16_UTIL, "fp16_active", false},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, "pcie_tx_bytes", true},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, "pcie_rx_bytes", true},
    {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, "nvlink_tx_bytes", true},
    {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, "nvlink_rx_bytes", true},
};

void Warn(std::string* w, const std::string& m) { *w += (w->empty() ? "" : "; ") + m; }

}  // namespace

Result<NvmlGpm> NvmlGpm::Open(const NvmlLibrary* nvml, const NvmlDevice& device, int gpu_instance,
                              Options options) {
  const std::string gpu = device.name.empty() ? "gpu" + std::to_string(device.index) : device.name;
  auto supported = nvml->GpmSupported(device);
  if (!supported.ok()) {
    return Unsupported("GPM not readable on " + gpu + ": " + supported.status().message());
  }
  if (!*supported) {
    return Unsupported("GPM not supported on " + gpu +
                       " (Hopper or later needed; NVML says isSupportedDevice = 0)");
  }
  NvmlGpm g;
  g.nvml_ = nvml;
  g.device_ = device;
  g.gpu_instance_ = gpu_instance;
  g.options_ = options;
  auto a = nvml->GpmSampleAlloc();
  if (!a.ok()) return a.status();
  g.first_ = *a;
  auto b = nvml->GpmSampleAlloc();
  if (!b.ok()) return b.status();  // g's destructor frees first_
  g.second_ = *b;
  return g;
}

NvmlGpm::NvmlGpm(NvmlGpm&& o) noexcept { *this = std::move(o); }

NvmlGpm& NvmlGpm::operator=(NvmlGpm&& o) noexcept {
  if (this != &o) {
    Free();
    nvml_ = o.nvml_;
    device_ = o.device_;
    gpu_instance_ = o.gpu_instance_;
    options_ = o.options_;
    first_ = std::exchange(o.first_, nullptr);
    second_ = std::exchange(o.second_, nullptr);
    begin_ns_ = o.begin_ns_;
  }
  return *this;
}

NvmlGpm::~NvmlGpm() { Free(); }

void NvmlGpm::Free() {
  if (nvml_ != nullptr) {
    nvml_->GpmSampleFree(first_);
    nvml_->GpmSampleFree(second_);
  }
  first_ = second_ = nullptr;
}

Status NvmlGpm::Begin(int64_t now_ns) {
  begin_ns_ = -1;
  Status s = nvml_->GpmSampleGet(device_, gpu_instance_, first_);
  if (s.ok()) begin_ns_ = now_ns;
  return s;
}

Status NvmlGpm::End(int64_t now_ns, const std::string& prefix, const std::string& device_label,
                    std::vector<Sample>* out, std::string* warnings) {
  if (begin_ns_ < 0) return Unavailable(prefix + " GPM: no first sample for this window");
  const int64_t window = now_ns - begin_ns_;
  begin_ns_ = -1;
  if (window < options_.min_window_ns) {
    // Each edge is late by up to the 100 ms refresh: too short a window is not exact.
    return Unavailable(prefix + " GPM: window " + std::to_string(window / 1'000'000) +
                       " ms is shorter than " + std::to_string(options_.min_window_ns / 1'000'000) +
                       " ms (GPM refreshes every 100 ms: each edge is uncertain by up to "
                       "100 ms): left out");
  }
  SEQPOINT_RETURN_IF_ERROR(nvml_->GpmSampleGet(device_, gpu_instance_, second_));
  nvmlGpmMetricsGet_t request{};
  request.version = NVML_GPM_METRICS_GET_VERSION;  // the raw 1 (nvml.h), not NVML_STRUCT_VERSION
  request.sample1 = first_;
  request.sample2 = second_;
  for (const Metric& m : kMetrics) request.metrics[request.numMetrics++].metricId = m.id;
  SEQPOINT_RETURN_IF_ERROR(nvml_->GpmMetricsGet(&request));
  const double seconds = static_cast<double>(window) * 1e-9;
  size_t emitted = 0;
  for (unsigned i = 0; i < request.numMetrics; ++i) {
    const nvmlGpmMetric_t& r = request.metrics[i];
    const Metric& m = kMetrics[i];
    const std::string name = prefix + ":" + m.name;
    if (r.metricId != m.id) {
      Warn(warnings, name + ": NVML answered metric id " + std::to_string(r.metricId) +
                         " in its place: left out");
      continue;
    }
    if (r.nvmlReturn != NVML_SUCCESS) {
      Warn(warnings, name + ": " + nvml_->ErrorText(r.nvmlReturn));
      continue;
    }
    if (m.bytes) {
      out->push_back(DeviceSample(name, r.value * 1048576.0 * seconds, "bytes", SampleKind::kDelta,
                                  device_label));
    } else {
      out->push_back(
          DeviceSample(name, r.value / 100.0, "ratio", SampleKind::kGauge, device_label));
    }
    ++emitted;
  }
  if (emitted == 0) return Unavailable(prefix + " GPM: no metric answered");
  out->push_back(DeviceSample(prefix + ":gpm_window_ns", static_cast<double>(window), "ns",
                              SampleKind::kGauge, device_label));
  // The widened interval: each edge late by up to one refresh.
  const double edge_error =
      std::min(1.0, 2.0 * static_cast<double>(options_.refresh_ns) / static_cast<double>(window));
  out->push_back(DeviceSample(prefix + ":gpm_edge_error", edge_error, "ratio", SampleKind::kGauge,
                              device_label));
  return Status::Ok();
}

}  // namespace seqpoint::collectors
