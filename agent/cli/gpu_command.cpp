// `seqpoint gpu [--sysfs-root DIR] [--json]`: prints each GPU's decoded firmware telemetry
// (amdgpu gpu_metrics table and hwmon attributes) as a text block per device, or as JSON.
// Exit status: 0 when the root could be scanned (GPUs with failing reads included: each part
// carries its own status), 0 with a note when there is no GPU, 1 when the root is missing,
// 2 on a usage error.
#include <cstdio>
#include <string>
#include <vector>

#include "agent/cli/cli_args.h"
#include "agent/cli/commands.h"
#include "firmware-shim/gpu_device.h"
#include "firmware-shim/telemetry_report.h"

namespace seqpoint::cli {

int RunGpuCommand(Args args) {
  const std::vector<OptionSpec> specs = {
      {"--sysfs-root", true, "directory standing for / (default: the live /, i.e. /sys)", "DIR"},
      {"--json", false, "print JSON instead of text"},
  };
  auto parsed = ParseArgs(args, specs);
  if (!parsed.ok()) {
    std::fprintf(stderr, "seqpoint gpu: %s\n", parsed.status().message().c_str());
    return 2;
  }
  if (parsed->Has("--help")) {
    PrintHelp("gpu [--sysfs-root DIR] [--json]",
              "Prints each GPU's telemetry: the decoded amdgpu gpu_metrics table (every format "
              "revision 1.0-1.8, 2.0-2.4, 3.0) and the hwmon power, energy, temperature, clock "
              "and voltage attributes.",
              specs);
    return 0;
  }
  if (!parsed->positional().empty()) {
    std::fprintf(stderr, "seqpoint gpu: unexpected argument '%s' (see --help)\n",
                 parsed->positional().front().c_str());
    return 2;
  }
  const std::string root = parsed->Get("--sysfs-root").value_or("/");
  const bool json = parsed->Has("--json");

  const firmware::SysfsRoot sysfs(root);
  auto devices = firmware::DiscoverGpus(sysfs);
  if (!devices.ok()) {
    std::fprintf(stderr, "seqpoint gpu: %s\n", devices.status().message().c_str());
    return 1;
  }
  std::vector<firmware::DeviceTelemetry> telemetry;
  telemetry.reserve(devices->size());
  for (const auto& d : *devices) telemetry.push_back(d.ReadAll());

  if (json) {
    std::printf("%s\n", firmware::TelemetryReportJson(telemetry).dump(2).c_str());
    if (telemetry.empty()) {
      std::fprintf(stderr, "no GPU telemetry found under %s\n", sysfs.root().c_str());
    }
    return 0;
  }
  if (telemetry.empty()) {
    std::printf("no GPU telemetry found under %s\n", sysfs.root().c_str());
    return 0;
  }
  std::fputs(firmware::FormatTelemetryText(telemetry).c_str(), stdout);
  return 0;
}

}  // namespace seqpoint::cli
