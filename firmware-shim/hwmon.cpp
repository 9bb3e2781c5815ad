#include "firmware-shim/hwmon.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "firmware-shim/sysfs_file.h"

namespace seqpoint::firmware {
namespace {

namespace fs = std::filesystem;

// "temp12_input" -> {"temp", 12}; anything else -> {"", -1}.
std::pair<std::string, int> SplitInputName(const std::string& file) {
  constexpr std::string_view kSuffix = "_input";
  if (file.size() <= kSuffix.size() || !file.ends_with(kSuffix)) return {"", -1};
  const std::string stem = file.substr(0, file.size() - kSuffix.size());
  size_t digits = stem.size();
  while (digits > 0 && stem[digits - 1] >= '0' && stem[digits - 1] <= '9') --digits;
  if (digits == stem.size() || digits == 0) return {"", -1};
  int index = 0;
  std::from_chars(stem.data() + digits, stem.data() + stem.size(), index);
  return {stem.substr(0, digits), index};
}

int IndexOf(const std::string& name) {
  size_t digits = name.size();
  while (digits > 0 && name[digits - 1] >= '0' && name[digits - 1] <= '9') --digits;
  int index = 0;
  std::from_chars(name.data() + digits, name.data() + name.size(), index);
  return index;
}

}  // namespace

Result<Hwmon> Hwmon::Discover(const std::string& device_dir) {
  const std::string parent = device_dir + "/hwmon";
  std::error_code ec;
  std::vector<std::string> dirs;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind("hwmon", 0) == 0 && n.size() > 5) dirs.push_back(n);
  }
  if (dirs.empty()) {
    return NotFound(parent + ": no hwmon directory (driver without hwmon support)");
  }
  std::sort(dirs.begin(), dirs.end(),
            [](const std::string& a, const std::string& b) { return IndexOf(a) < IndexOf(b); });
  Hwmon h;
  h.relative_ = "hwmon/" + dirs.front();
  h.path_ = parent + "/" + dirs.front();
  if (auto name = ReadTextFile(h.path_ + "/name"); name.ok()) h.name_ = *name;

  std::vector<std::pair<std::string, int>> inputs;
  for (fs::directory_iterator it(h.path_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (file == "power1_average") h.has_power_average_ = true;
    if (file == "power1_input") h.has_power_input_ = true;
    if (file == "energy1_input") h.has_energy_ = true;
    auto [kind, index] = SplitInputName(file);
    if (kind == "temp" || kind == "freq" || kind == "in" || kind == "fan") {
      inputs.emplace_back(kind, index);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (const auto& [kind, index] : inputs) {
    Attr a;
    a.name = kind + std::to_string(index);
    a.input = h.path_ + "/" + a.name + "_input";
    auto label = ReadTextFile(h.path_ + "/" + a.name + "_label");
    a.label = label.ok() && !label->empty() ? *label : a.name;
    (kind == "temp"   ? h.temps_
     : kind == "freq" ? h.freqs_
     : kind == "in"   ? h.volts_
                      : h.fans_)
        .push_back(std::move(a));
  }
  return h;
}

HwmonReading Hwmon::Read() const {
  HwmonReading r;
  r.dir = relative_;
  r.name = name_;
  // Values are divided by their exact per-unit count (see UnitRules in gpu_metrics_layout.h).
  auto read_scaled = [&](const std::string& file, double divisor) -> std::optional<double> {
    auto v = ReadIntegerFile(path_ + "/" + file);
    if (!v.ok()) {
      r.errors.emplace_back(file, v.status());
      return std::nullopt;
    }
    return static_cast<double>(*v) / divisor;
  };
  if (has_power_average_) r.power_average_w = read_scaled("power1_average", 1e6);
  if (has_power_input_) r.power_input_w = read_scaled("power1_input", 1e6);
  if (has_energy_) {
    auto e = ReadIntegerFile(path_ + "/energy1_input");
    if (e.ok() && *e >= 0) {
      r.energy_uj = static_cast<uint64_t>(*e);
    } else {
      r.errors.emplace_back(
          "energy1_input",
          e.ok() ? InvalidArgument(path_ + "/energy1_input: negative energy") : e.status());
    }
  }
  auto read_list = [&](const std::vector<Attr>& attrs, double divisor,
                       std::vector<HwmonSensor>& out) {
    for (const Attr& a : attrs) {
      if (auto v = read_scaled(a.name + "_input", divisor)) out.push_back({a.name, a.label, *v});
    }
  };
  read_list(temps_, 1e3, r.temperatures_c);  // millidegrees C
  read_list(freqs_, 1e6, r.clocks_mhz);      // Hz
  read_list(volts_, 1e3, r.voltages_v);      // mV
  read_list(fans_, 1.0, r.fans_rpm);         // RPM
  return r;
}

Result<double> Hwmon::ReadPowerWatts() const {
  if (!has_power_average_ && !has_power_input_) {
    return NotFound(path_ + ": neither power1_average nor power1_input exists");
  }
  auto v = ReadIntegerFile(path_ + (has_power_average_ ? "/power1_average" : "/power1_input"));
  if (!v.ok()) return v.status();
  return static_cast<double>(*v) / 1e6;
}

Result<uint64_t> Hwmon::ReadEnergyMicrojoules() const {
  if (!has_energy_) return NotFound(path_ + ": no energy1_input");
  auto v = ReadIntegerFile(path_ + "/energy1_input");
  if (!v.ok()) return v.status();
  if (*v < 0)
    return InvalidArgument(path_ + "/energy1_input: negative energy " + std::to_string(*v));
  return static_cast<uint64_t>(*v);
}

}  // namespace seqpoint::firmware
