#include "collectors/papi/papi_library.h"

#include <papi.h>

namespace seqpoint::collectors {
namespace {

std::string_view PapiErrorName(int code) {
  switch (code) {
    case PAPI_EINVAL:
      return "PAPI_EINVAL";
    case PAPI_ENOMEM:
      return "PAPI_ENOMEM";
    case PAPI_ESYS:
      return "PAPI_ESYS";
    case PAPI_ECMP:
      return "PAPI_ECMP";
    case PAPI_ECLOST:
      return "PAPI_ECLOST";
    case PAPI_EBUG:
      return "PAPI_EBUG";
    case PAPI_ENOEVNT:
      return "PAPI_ENOEVNT";
    case PAPI_ECNFLCT:
      return "PAPI_ECNFLCT";
    case PAPI_ENOTRUN:
      return "PAPI_ENOTRUN";
    case PAPI_EISRUN:
      return "PAPI_EISRUN";
    case PAPI_ENOEVST:
      return "PAPI_ENOEVST";
    case PAPI_ENOTPRESET:
      return "PAPI_ENOTPRESET";
    case PAPI_ENOCNTR:
      return "PAPI_ENOCNTR";
    case PAPI_EMISC:
      return "PAPI_EMISC";
    case PAPI_EPERM:
      return "PAPI_EPERM";
    case PAPI_ENOINIT:
      return "PAPI_ENOINIT";
    case PAPI_ENOCMP:
      return "PAPI_ENOCMP";
    case PAPI_ENOSUPP:
      return "PAPI_ENOSUPP";
    case PAPI_ENOIMPL:
      return "PAPI_ENOIMPL";
    case PAPI_EBUF:
      return "PAPI_EBUF";
    case PAPI_EINVAL_DOM:
      return "PAPI_EINVAL_DOM";
    case PAPI_EATTR:
      return "PAPI_EATTR";
    case PAPI_ECOUNT:
      return "PAPI_ECOUNT";
    case PAPI_ECOMBO:
      return "PAPI_ECOMBO";
    case PAPI_ECMP_DISABLED:
      return "PAPI_ECMP_DISABLED";
    case PAPI_EDELAY_INIT:
      return "PAPI_EDELAY_INIT";
    case PAPI_EMULPASS:
      return "PAPI_EMULPASS";
    default:
      return "PAPI error";
  }
}

// The component an event name belongs to by PAPI's naming: "comp:::event" for most
// components, "perf::event" and presets (PAPI_*) for perf_event.
std::string ComponentOfName(std::string_view name) {
  size_t triple = name.find(":::");
  if (triple != std::string_view::npos) return std::string(name.substr(0, triple));
  if (name.substr(0, 5) == "PAPI_" || name.substr(0, 6) == "perf::") return "perf_event";
  return {};
}

}  // namespace

std::string PapiErrorText(int code) {
  const char* text = PAPI_strerror(code);
  return std::string(PapiErrorName(code)) + " (" + (text ? text : "unknown") + ")";
}

Status EnsurePapi() {
  static const Status status = [] {
    int v = PAPI_library_init(PAPI_VER_CURRENT);
    if (v == PAPI_VER_CURRENT) return Status::Ok();
    if (v > 0) {
      return Unsupported("libpapi version mismatch: built for " + std::to_string(PAPI_VER_CURRENT) +
                         ", library is " + std::to_string(v) + " (reinstall libpapi-dev)");
    }
    return Unavailable("PAPI_library_init failed: " + PapiErrorText(v));
  }();
  return status;
}

Result<PapiComponent> PapiComponentInfo(int index) {
  SEQPOINT_RETURN_IF_ERROR(EnsurePapi());
  const PAPI_component_info_t* info = PAPI_get_component_info(index);
  if (info == nullptr) return NotFound("no PAPI component " + std::to_string(index));
  PapiComponent c;
  c.index = index;
  c.name = info->name;
  c.description = info->description;
  c.disabled = info->disabled != 0;
  c.delayed_init = info->disabled == PAPI_EDELAY_INIT;
  c.disabled_reason = info->disabled_reason;
  c.attach = info->attach != 0;
  c.counters = info->num_cntrs;
  return c;
}

Result<std::vector<PapiComponent>> ListPapiComponents() {
  SEQPOINT_RETURN_IF_ERROR(EnsurePapi());
  std::vector<PapiComponent> out;
  const int n = PAPI_num_components();
  for (int i = 0; i < n; ++i) {
    Result<PapiComponent> c = PapiComponentInfo(i);
    if (c.ok()) out.push_back(std::move(c).value());
  }
  return out;
}

Result<std::vector<std::string>> ListPapiEvents(int component, size_t max) {
  SEQPOINT_RETURN_IF_ERROR(EnsurePapi());
  std::vector<std::string> out;
  int code = PAPI_NATIVE_MASK;
  int r = PAPI_enum_cmp_event(&code, PAPI_ENUM_FIRST, component);
  while (r == PAPI_OK && out.size() < max) {
    char name[PAPI_MAX_STR_LEN];
    if (PAPI_event_code_to_name(code, name) == PAPI_OK) out.emplace_back(name);
    r = PAPI_enum_cmp_event(&code, PAPI_ENUM_EVENTS, component);
  }
  return out;
}

Result<PapiEvent> ResolvePapiEvent(std::string_view name) {
  SEQPOINT_RETURN_IF_ERROR(EnsurePapi());
  const std::string n(name);
  // A disabled component first: its reason is the real answer ("no default PMU found").
  const std::string comp_name = ComponentOfName(name);
  if (!comp_name.empty()) {
    int cidx = PAPI_get_component_index(comp_name.c_str());
    if (cidx < 0) {
      return NotFound("PAPI event '" + n + "': this PAPI has no component '" + comp_name +
                      "' (papi_component_avail lists the compiled-in components)");
    }
    Result<PapiComponent> comp = PapiComponentInfo(cidx);
    // A delayed-init component (rocm_smi, cuda) initialises on first event access, below.
    if (comp.ok() && comp->disabled && !comp->delayed_init) {
      return Unsupported("PAPI event '" + n + "': component " + comp->name +
                         " is disabled: " + comp->disabled_reason);
    }
  }
  // The sde component resolves any name to a placeholder that a library may register later
  // (src/components/sde/sde.c), which counts nothing and would read 0. So an sde name must be
  // listed already, checked before PAPI_event_name_to_code creates a placeholder.
  if (comp_name == "sde") {
    Result<std::vector<std::string>> known =
        ListPapiEvents(PAPI_get_component_index("sde"), 100000);
    bool registered = false;
    if (known.ok()) {
      for (const std::string& k : *known) registered |= k == n;
    }
    if (!registered) {
      return NotFound("PAPI event '" + n + "' is unknown: no library in this process has " +
                      "registered it (papi_native_avail lists the events)");
    }
  }
  int code = 0;
  int r = PAPI_event_name_to_code(n.c_str(), &code);
  if (r != PAPI_OK && !comp_name.empty()) {
    // The access may have run a delayed init that failed: its reason is the answer.
    Result<PapiComponent> comp = PapiComponentInfo(PAPI_get_component_index(comp_name.c_str()));
    if (comp.ok() && comp->disabled && !comp->delayed_init) {
      return Unsupported("PAPI event '" + n + "': component " + comp->name +
                         " is disabled: " + comp->disabled_reason);
    }
  }
  if (r != PAPI_OK) {
    return NotFound("PAPI event '" + n + "' is unknown: " + PapiErrorText(r) +
                    " (papi_native_avail and papi_avail list the events of this node)");
  }
  PapiEvent ev{n, code, PAPI_get_event_component(code)};
  if (ev.component >= 0) {
    Result<PapiComponent> comp = PapiComponentInfo(ev.component);
    if (comp.ok() && comp->disabled) {
      return Unsupported("PAPI event '" + n + "': component " + comp->name +
                         " is disabled: " + comp->disabled_reason);
    }
  }
  return ev;
}

}  // namespace seqpoint::collectors
