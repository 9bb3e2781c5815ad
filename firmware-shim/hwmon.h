// The hwmon directory of a GPU (device/hwmon/hwmonN), per the kernel's sysfs-interface ABI
// (Documentation/hwmon/sysfs-interface.rst) and amdgpu's use of it (amdgpu_pm.c):
//   power1_average, power1_input  microwatts   (amdgpu: average / instantaneous socket power)
//   energy1_input                 microjoules  (amdgpu has none; other GPU drivers do)
//   tempN_input + tempN_label     millidegrees C ("edge", "junction", "mem")
//   freqN_input + freqN_label     hertz        ("sclk", "mclk")
//   inN_input + inN_label         millivolts   ("vddgfx", "vddnb")
//   fanN_input                    RPM
// The directory is listed once (Discover); reads then touch only the files found, so a read
// at every iteration boundary costs one open/read/close per attribute. A file that fails reads
// as absent and its Status is kept in `errors`; one broken attribute never hides the others.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace seqpoint::firmware {

struct HwmonSensor {
  std::string name;   // "temp1"
  std::string label;  // "edge"; the name when the driver gives no label
  double value = 0;   // in the unit of the list it is in
};

struct HwmonReading {
  std::string dir;   // the hwmon directory, relative to the device ("hwmon/hwmon3")
  std::string name;  // contents of `name`, e.g. "amdgpu"
  std::optional<double> power_average_w, power_input_w;
  std::optional<uint64_t> energy_uj;
  std::vector<HwmonSensor> temperatures_c, clocks_mhz, voltages_v, fans_rpm;
  std::vector<std::pair<std::string, Status>> errors;  // attribute -> why it has no value
};

class Hwmon {
 public:
  // Finds the hwmon directory of a device directory (…/cardN/device). NotFound when it has
  // none. When several exist the lowest-numbered one is used.
  static Result<Hwmon> Discover(const std::string& device_dir);

  HwmonReading Read() const;
  // Hot-path reads of single attributes.
  Result<double> ReadPowerWatts() const;           // power1_average, else power1_input
  Result<uint64_t> ReadEnergyMicrojoules() const;  // energy1_input

  const std::string& path() const { return path_; }

 private:
  struct Attr {
    std::string name;   // "temp1"
    std::string label;  // read once at discovery
    std::string input;  // full path of <name>_input
  };
  std::string path_;
  std::string relative_;
  std::string name_;
  std::vector<Attr> temps_, freqs_, volts_, fans_;
  bool has_power_average_ = false, has_power_input_ = false, has_energy_ = false;
};

}  // namespace seqpoint::firmware
