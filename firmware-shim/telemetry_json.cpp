// JSON rendering of DeviceTelemetry: the schema of `seqpoint gpu --json` (firmware-shim/README.md).
#include <cstdio>
#include <optional>

#include "firmware-shim/telemetry_report.h"

namespace seqpoint::firmware {
namespace {

using nlohmann::json;

std::string StatusKey(const Status& s) {
  switch (s.code()) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kIoError:
      return "io_error";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

template <typename T>
void Put(json& obj, const char* key, const std::optional<T>& v) {
  if (v) obj[key] = *v;
}

template <size_t N>
void PutInstances(json& obj, const char* key, const Instances<N>& in) {
  if (!in.any()) return;
  json arr = json::array();
  for (size_t i = 0; i < in.count; ++i) {
    const auto v = in.at(i);
    arr.push_back(v ? json(*v) : json(nullptr));
  }
  obj[key] = std::move(arr);
}

std::string Hex(uint64_t v, int width) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%0*llx", width, static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

json GpuMetricsToJson(const GpuMetrics& m) {
  json j;
  j["status"] = "ok";
  j["revision"] = std::to_string(m.format_revision) + "." + std::to_string(m.content_revision);
  j["layout"] = m.layout;
  j["structure_size"] = m.structure_size;
  j["bytes_read"] = m.bytes_read;
  j["apu"] = m.is_apu;

  json t = json::object();
  const Temperatures& tt = m.temperature;
  Put(t, "edge", tt.edge);
  Put(t, "hotspot", tt.hotspot);
  Put(t, "mem", tt.mem);
  Put(t, "vrgfx", tt.vr_gfx);
  Put(t, "vrsoc", tt.vr_soc);
  Put(t, "vrmem", tt.vr_mem);
  Put(t, "gfx", tt.gfx);
  Put(t, "soc", tt.soc);
  Put(t, "skin", tt.skin);
  PutInstances(t, "hbm", tt.hbm);
  PutInstances(t, "core", tt.core);
  PutInstances(t, "l3", tt.l3);
  j["temperature_c"] = std::move(t);

  json a = json::object();
  Put(a, "gfx", m.activity.gfx);
  Put(a, "umc", m.activity.umc);
  Put(a, "mm", m.activity.mm);
  PutInstances(a, "vcn", m.activity.vcn);
  a["unit_inferred"] = m.activity.unit_inferred;
  j["activity_pct"] = std::move(a);

  json p = json::object();
  const Power& pp = m.power;
  Put(p, "socket", pp.socket);
  if (pp.socket) p["socket_is_instantaneous"] = pp.socket_is_instantaneous;
  Put(p, "cpu", pp.cpu);
  Put(p, "soc", pp.soc);
  Put(p, "gfx", pp.gfx);
  Put(p, "apu", pp.apu);
  Put(p, "dgpu", pp.dgpu);
  Put(p, "all_cores", pp.all_cores);
  Put(p, "system", pp.system);
  Put(p, "ipu", pp.ipu);
  PutInstances(p, "core", pp.core);
  j["power_w"] = std::move(p);

  if (m.energy_accumulator) {
    j["energy"] = {{"accumulator", *m.energy_accumulator},
                   {"counter_bits", m.energy_counter_bits},
                   {"joules_per_count", m.energy_joules_per_count},
                   {"joules", *m.energy_joules()}};
  }

  json c = json::object();
  const Clocks& cc = m.clock;
  Put(c, "avg_gfx", cc.avg_gfx);
  Put(c, "avg_soc", cc.avg_soc);
  Put(c, "avg_uclk", cc.avg_uclk);
  Put(c, "avg_fclk", cc.avg_fclk);
  Put(c, "avg_vclk0", cc.avg_vclk0);
  Put(c, "avg_dclk0", cc.avg_dclk0);
  Put(c, "avg_vclk1", cc.avg_vclk1);
  Put(c, "avg_dclk1", cc.avg_dclk1);
  PutInstances(c, "gfx", cc.gfx);
  PutInstances(c, "soc", cc.soc);
  Put(c, "uclk", cc.uclk);
  Put(c, "fclk", cc.fclk);
  PutInstances(c, "vclk0", cc.vclk0);
  PutInstances(c, "dclk0", cc.dclk0);
  Put(c, "vclk1", cc.vclk1);
  Put(c, "dclk1", cc.dclk1);
  PutInstances(c, "core", cc.core);
  PutInstances(c, "l3", cc.l3);
  j["clock_mhz"] = std::move(c);

  json th = json::object();
  const Throttle& tr = m.throttle;
  Put(th, "status", tr.status);
  if (tr.indep_status) {
    th["indep_status"] = *tr.indep_status;
    th["reasons"] = IndepThrottlerNames(*tr.indep_status);
    th["power_throttled"] = IsPowerThrottled(*tr.indep_status);
    th["thermal_throttled"] = IsThermalThrottled(*tr.indep_status);
  }
  Put(th, "accumulation_counter", tr.accumulation_counter);
  Put(th, "prochot_acc", tr.prochot_acc);
  Put(th, "ppt_acc", tr.ppt_acc);
  Put(th, "socket_thermal_acc", tr.socket_thermal_acc);
  Put(th, "vr_thermal_acc", tr.vr_thermal_acc);
  Put(th, "hbm_thermal_acc", tr.hbm_thermal_acc);
  Put(th, "residency_prochot", tr.prochot);
  Put(th, "residency_spl", tr.spl);
  Put(th, "residency_fppt", tr.fppt);
  Put(th, "residency_sppt", tr.sppt);
  Put(th, "residency_thermal_core", tr.thermal_core);
  Put(th, "residency_thermal_gfx", tr.thermal_gfx);
  Put(th, "residency_thermal_soc", tr.thermal_soc);
  j["throttle"] = std::move(th);

  json o = json::object();
  Put(o, "fan_rpm", m.fan_rpm);
  Put(o, "fan_pwm", m.fan_pwm);
  Put(o, "pcie_link_width", m.pcie_link_width);
  Put(o, "pcie_link_speed_gts", m.pcie_link_speed_gts);
  Put(o, "voltage_soc_v", m.voltage_soc_v);
  Put(o, "voltage_gfx_v", m.voltage_gfx_v);
  Put(o, "voltage_mem_v", m.voltage_mem_v);
  Put(o, "voltage_cpu_v", m.voltage_cpu_v);
  Put(o, "current_cpu_a", m.current_cpu_a);
  Put(o, "current_soc_a", m.current_soc_a);
  Put(o, "current_gfx_a", m.current_gfx_a);
  Put(o, "system_clock_ns", m.system_clock_ns);
  Put(o, "firmware_timestamp_10ns", m.firmware_timestamp_10ns);
  j["other"] = std::move(o);
  return j;
}

json HwmonToJson(const HwmonReading& h) {
  json j;
  j["status"] = "ok";
  j["dir"] = h.dir;
  j["name"] = h.name;
  Put(j, "power_average_w", h.power_average_w);
  Put(j, "power_input_w", h.power_input_w);
  Put(j, "energy_uj", h.energy_uj);
  auto sensors = [](const std::vector<HwmonSensor>& list) {
    json o = json::object();
    for (const auto& s : list) o[s.label] = s.value;
    return o;
  };
  j["temperature_c"] = sensors(h.temperatures_c);
  j["clock_mhz"] = sensors(h.clocks_mhz);
  j["voltage_v"] = sensors(h.voltages_v);
  j["fan_rpm"] = sensors(h.fans_rpm);
  json errors = json::object();
  for (const auto& [file, status] : h.errors) {
    errors[file] = {{"status", StatusKey(status)}, {"error", status.message()}};
  }
  j["errors"] = std::move(errors);
  return j;
}

json TelemetryToJson(const DeviceTelemetry& t) {
  json j;
  j["card"] = t.card;
  json pci = json::object();
  if (t.pci_vendor) pci["vendor"] = Hex(*t.pci_vendor, 4);
  if (t.pci_device) pci["device"] = Hex(*t.pci_device, 4);
  if (t.pci_slot) pci["slot"] = *t.pci_slot;
  j["pci"] = std::move(pci);
  if (t.metrics) {
    j["gpu_metrics"] = GpuMetricsToJson(*t.metrics);
  } else {
    j["gpu_metrics"] = {{"status", StatusKey(t.metrics_status)},
                        {"error", t.metrics_status.message()}};
  }
  if (t.hwmon) {
    j["hwmon"] = HwmonToJson(*t.hwmon);
  } else {
    j["hwmon"] = {{"status", StatusKey(t.hwmon_status)}, {"error", t.hwmon_status.message()}};
  }
  return j;
}

json TelemetryReportJson(const std::vector<DeviceTelemetry>& devices) {
  json arr = json::array();
  for (const auto& d : devices) arr.push_back(TelemetryToJson(d));
  return {{"devices", std::move(arr)}};
}

}  // namespace seqpoint::firmware
