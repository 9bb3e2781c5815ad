// Text rendering of DeviceTelemetry for `seqpoint gpu`: a block per device, one line per
// quantity, absent values left out.
#include <cstdio>
#include <optional>
#include <string_view>

#include "firmware-shim/telemetry_report.h"

namespace seqpoint::firmware {
namespace {

std::string Hex(uint64_t v, int width) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%0*llx", width, static_cast<unsigned long long>(v));
  return buf;
}

// "12.3" with up to `decimals` decimals and no trailing zeros.
std::string Num(double v, int decimals = 3) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

// Accumulates "name value unit" items for one line of the text report.
class Line {
 public:
  void Add(std::string_view name, const std::optional<double>& v, std::string_view unit,
           int decimals = 3) {
    if (!v) return;
    Item(std::string(name) + " " + Num(*v, decimals) + (unit.empty() ? "" : " ") +
         std::string(unit));
  }
  template <size_t N>
  void AddInstances(std::string_view name, const Instances<N>& in, std::string_view unit,
                    int decimals = 3) {
    if (!in.any()) return;
    std::string s = std::string(name) + " [";
    for (size_t i = 0; i < in.count; ++i) {
      if (i > 0) s += ' ';
      const auto v = in.at(i);
      s += v ? Num(*v, decimals) : "-";
    }
    Item(s + "] " + std::string(unit));
  }
  void Item(std::string s) {
    if (!text_.empty()) text_ += "  ";
    text_ += s;
  }
  void Flush(std::string& out, std::string_view title) {
    if (text_.empty()) return;
    char head[32];
    std::snprintf(head, sizeof(head), "    %-12.*s ", static_cast<int>(title.size()), title.data());
    out += head + text_ + "\n";
    text_.clear();
  }

 private:
  std::string text_;
};

void FormatMetrics(const GpuMetrics& m, std::string& out) {
  out += "  gpu_metrics  v" + std::to_string(m.format_revision) + "." +
         std::to_string(m.content_revision) + " (" + m.layout + ", " +
         std::to_string(m.structure_size) + " of " + std::to_string(m.bytes_read) +
         " bytes read)\n";
  Line l;
  const Temperatures& t = m.temperature;
  l.Add("edge", t.edge, "C", 2);
  l.Add("hotspot", t.hotspot, "C", 2);
  l.Add("mem", t.mem, "C", 2);
  l.Add("vrgfx", t.vr_gfx, "C", 2);
  l.Add("vrsoc", t.vr_soc, "C", 2);
  l.Add("vrmem", t.vr_mem, "C", 2);
  l.Add("gfx", t.gfx, "C", 2);
  l.Add("soc", t.soc, "C", 2);
  l.Add("skin", t.skin, "C", 2);
  l.AddInstances("hbm", t.hbm, "C", 2);
  l.AddInstances("core", t.core, "C", 2);
  l.AddInstances("l3", t.l3, "C", 2);
  l.Flush(out, "temperature");
  l.Add("gfx", m.activity.gfx, "%", 2);
  l.Add("umc", m.activity.umc, "%", 2);
  l.Add("mm", m.activity.mm, "%", 2);
  l.AddInstances("vcn", m.activity.vcn, "%", 2);
  if (m.activity.unit_inferred) l.Item("(unit inferred)");
  l.Flush(out, "activity");
  const Power& p = m.power;
  l.Add(p.socket_is_instantaneous ? "socket (now)" : "socket (avg)", p.socket, "W");
  l.Add("cpu", p.cpu, "W");
  l.Add("soc", p.soc, "W");
  l.Add("gfx", p.gfx, "W");
  l.Add("apu", p.apu, "W");
  l.Add("dgpu", p.dgpu, "W");
  l.Add("cores", p.all_cores, "W");
  l.Add("system", p.system, "W");
  l.Add("ipu", p.ipu, "W");
  l.AddInstances("core", p.core, "W");
  l.Flush(out, "power");
  if (m.energy_accumulator) {
    l.Item(Num(*m.energy_joules(), 3) + " J (counter " + std::to_string(*m.energy_accumulator) +
           " x 15.259 uJ, " + std::to_string(m.energy_counter_bits) + "-bit)");
    l.Flush(out, "energy");
  }
  const Clocks& c = m.clock;
  l.AddInstances("gfx", c.gfx, "MHz", 0);
  l.AddInstances("soc", c.soc, "MHz", 0);
  l.Add("uclk", c.uclk, "MHz", 0);
  l.Add("fclk", c.fclk, "MHz", 0);
  l.AddInstances("vclk0", c.vclk0, "MHz", 0);
  l.AddInstances("dclk0", c.dclk0, "MHz", 0);
  l.Add("vclk1", c.vclk1, "MHz", 0);
  l.Add("dclk1", c.dclk1, "MHz", 0);
  l.AddInstances("core", c.core, "MHz", 0);
  l.AddInstances("l3", c.l3, "MHz", 0);
  l.Flush(out, "clocks");
  l.Add("gfx", c.avg_gfx, "MHz", 0);
  l.Add("soc", c.avg_soc, "MHz", 0);
  l.Add("uclk", c.avg_uclk, "MHz", 0);
  l.Add("fclk", c.avg_fclk, "MHz", 0);
  l.Add("vclk0", c.avg_vclk0, "MHz", 0);
  l.Add("dclk0", c.avg_dclk0, "MHz", 0);
  l.Flush(out, "avg clocks");
  const Throttle& th = m.throttle;
  if (th.indep_status) {
    const auto names = IndepThrottlerNames(*th.indep_status);
    std::string s = names.empty() ? "none" : "";
    for (const auto& n : names) s += (s.empty() ? "" : " ") + n;
    l.Item(s);
  }
  if (th.status) l.Item("asic status " + Hex(*th.status, 8));
  if (th.accumulation_counter) {
    l.Item("residency/" + std::to_string(*th.accumulation_counter) + ": ppt " +
           (th.ppt_acc ? std::to_string(*th.ppt_acc) : "-") + " socket-thermal " +
           (th.socket_thermal_acc ? std::to_string(*th.socket_thermal_acc) : "-"));
  }
  l.Flush(out, "throttle");
  l.Add("fan", m.fan_rpm, "RPM", 0);
  l.Add("fan pwm", m.fan_pwm, "", 0);
  if (m.pcie_link_width) l.Item("pcie x" + Num(*m.pcie_link_width, 0));
  l.Add("pcie", m.pcie_link_speed_gts, "GT/s", 1);
  l.Add("soc", m.voltage_soc_v, "V");
  l.Add("gfx", m.voltage_gfx_v, "V");
  l.Add("mem", m.voltage_mem_v, "V");
  l.Add("cpu", m.voltage_cpu_v, "V");
  l.Flush(out, "other");
}

void FormatHwmon(const HwmonReading& h, std::string& out) {
  out += "  hwmon        " + h.dir + (h.name.empty() ? "" : " (" + h.name + ")") + "\n";
  Line l;
  l.Add("average", h.power_average_w, "W");
  l.Add("input", h.power_input_w, "W");
  l.Flush(out, "power");
  if (h.energy_uj) {
    l.Item(Num(static_cast<double>(*h.energy_uj) * 1e-6, 6) + " J");
    l.Flush(out, "energy");
  }
  for (const auto& s : h.temperatures_c) l.Add(s.label, s.value, "C", 2);
  l.Flush(out, "temperature");
  for (const auto& s : h.clocks_mhz) l.Add(s.label, s.value, "MHz", 0);
  l.Flush(out, "clocks");
  for (const auto& s : h.voltages_v) l.Add(s.label, s.value, "V");
  l.Flush(out, "voltage");
  for (const auto& s : h.fans_rpm) l.Add(s.label, s.value, "RPM", 0);
  l.Flush(out, "fan");
  for (const auto& [file, status] : h.errors) {
    l.Item(file + ": " + status.ToString());
    l.Flush(out, "error");
  }
}

}  // namespace

std::string FormatTelemetryText(const std::vector<DeviceTelemetry>& devices) {
  std::string out;
  for (const DeviceTelemetry& t : devices) {
    out += t.card;
    if (t.pci_vendor && t.pci_device) {
      out += "  pci " + Hex(*t.pci_vendor, 4) + ":" + Hex(*t.pci_device, 4);
    }
    if (t.pci_slot) out += "  " + *t.pci_slot;
    out += "\n";
    if (t.metrics) {
      FormatMetrics(*t.metrics, out);
    } else {
      out += "  gpu_metrics  " + t.metrics_status.ToString() + "\n";
    }
    if (t.hwmon) {
      FormatHwmon(*t.hwmon, out);
    } else {
      out += "  hwmon        " + t.hwmon_status.ToString() + "\n";
    }
  }
  return out;
}

}  // namespace seqpoint::firmware
