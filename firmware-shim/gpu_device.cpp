#include "firmware-shim/gpu_device.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <system_error>

namespace seqpoint::firmware {
namespace {

namespace fs = std::filesystem;

// "card12" -> 12; connectors ("card0-DP-1"), render nodes and others -> -1.
int CardIndex(const std::string& name) {
  if (name.size() <= 4 || name.rfind("card", 0) != 0) return -1;
  int index = 0;
  auto [ptr, ec] = std::from_chars(name.data() + 4, name.data() + name.size(), index);
  if (ec != std::errc() || ptr != name.data() + name.size()) return -1;
  return index;
}

std::optional<uint32_t> ReadHexId(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return std::nullopt;
  std::string_view s = *text;
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::string> ReadPciSlot(const std::string& uevent_path) {
  auto text = ReadTextFile(uevent_path, 511);
  if (!text.ok()) return std::nullopt;
  constexpr std::string_view kKey = "PCI_SLOT_NAME=";
  std::string_view s = *text;
  for (size_t pos = 0; pos < s.size();) {
    size_t eol = s.find('\n', pos);
    if (eol == std::string_view::npos) eol = s.size();
    std::string_view line = s.substr(pos, eol - pos);
    if (line.starts_with(kKey)) return std::string(line.substr(kKey.size()));
    pos = eol + 1;
  }
  return std::nullopt;
}

}  // namespace

Result<GpuMetrics> GpuDevice::ReadGpuMetrics() const {
  if (!has_gpu_metrics_) {
    return NotFound(metrics_path_ +
                    ": no gpu_metrics (not an amdgpu device, or a kernel "
                    "older than 5.9)");
  }
  std::array<uint8_t, kMetricsBufferBytes> buf;
  auto n = ReadFileBounded(metrics_path_, buf);
  if (!n.ok()) return n.status();
  return DecodeGpuMetrics(std::span<const uint8_t>(buf.data(), *n), metrics_path_);
}

Result<std::optional<double>> GpuDevice::ReadEnergyTotal() {
  auto m = ReadGpuMetrics();
  if (!m.ok()) return m.status();
  if (!m->energy_accumulator) return std::optional<double>();
  if (!energy_) energy_.emplace(m->energy_counter_bits, m->energy_joules_per_count);
  energy_->Add(*m->energy_accumulator);
  return std::optional<double>(energy_->total_joules());
}

DeviceTelemetry GpuDevice::ReadAll() const {
  DeviceTelemetry t;
  t.card = card_;
  t.pci_vendor = ReadHexId(device_dir_ + "/vendor");
  t.pci_device = ReadHexId(device_dir_ + "/device");
  t.pci_slot = ReadPciSlot(device_dir_ + "/uevent");
  auto m = ReadGpuMetrics();
  if (m.ok()) {
    t.metrics = std::move(m).value();
  } else {
    t.metrics_status = m.status();
  }
  if (hwmon_) {
    t.hwmon = hwmon_->Read();
  } else {
    t.hwmon_status = hwmon_discovery_;
  }
  return t;
}

Result<std::vector<GpuDevice>> DiscoverGpus(const SysfsRoot& root) {
  std::error_code ec;
  if (!fs::is_directory(root.root(), ec)) {
    return NotFound("sysfs root '" + root.root() +
                    "' is not a directory; pass --sysfs-root DIR with a tree that holds "
                    "sys/class/drm, or omit it to read the live /sys");
  }
  const std::string drm = root.Path("sys/class/drm");
  std::vector<std::pair<int, GpuDevice>> found;
  for (fs::directory_iterator it(drm, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const int index = CardIndex(name);
    if (index < 0) continue;
    GpuDevice d;
    d.card_ = name;
    d.device_dir_ = drm + "/" + name + "/device";
    d.metrics_path_ = d.device_dir_ + "/gpu_metrics";
    std::error_code exists_ec;
    d.has_gpu_metrics_ = fs::exists(d.metrics_path_, exists_ec);
    auto hw = Hwmon::Discover(d.device_dir_);
    if (hw.ok()) {
      d.hwmon_ = std::move(hw).value();
    } else {
      d.hwmon_discovery_ = hw.status();
    }
    if (!d.has_gpu_metrics_ && !d.hwmon_) continue;
    found.emplace_back(index, std::move(d));
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<GpuDevice> out;
  out.reserve(found.size());
  for (auto& [index, d] : found) out.push_back(std::move(d));
  return out;
}

}  // namespace seqpoint::firmware
