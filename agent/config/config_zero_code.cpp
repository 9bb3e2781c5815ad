// See config_zero_code.h. toml++ does not throw here: only accessors that return optionals and
// pointers are used.
#include "agent/config/config_zero_code.h"

#include <algorithm>
#include <functional>
#include <set>

#include "agent/config/config_zero_code_toml.h"
#include "probes/iteration_probe.h"  // SP_MAX_ZERO_CODE_PROBES (plain C header)

namespace seqpoint::daemon {
namespace {

using probes::ZeroCodeProbe;

constexpr int64_t kMaxArgIndex = 15;  // x86-64: 6 register arguments, 10 on the stack
constexpr size_t kMaxNameLength = 64;

std::string Where(std::string_view source, const toml::source_region& r) {
  return std::string(source) + ":" + std::to_string(r.begin.line) + ":" +
         std::to_string(r.begin.column);
}

std::string PresetNames() {
  std::string names;
  for (const ZeroCodeProbe& p : probes::ZeroCodePresets()) {
    names += (names.empty() ? "" : ", ") + p.name;
  }
  return names;
}

// One field of a custom probe: its documentation row and how a TOML value sets it.
struct Field {
  std::string_view name;
  std::string_view type;
  bool required;
  std::string_view example;  // the default for optional fields, unquoted: TomlQuote renders strings
  std::string_view doc;
  std::function<Status(const toml::node&, ZeroCodeProbe&)> set;
};

Status SetString(const toml::node& n, std::string* out) {
  if (!n.is_string() || n.as_string()->get().empty()) {
    return InvalidArgument("must be a non-empty string");
  }
  *out = **n.as_string();
  return Status::Ok();
}

// An argument's 0-based index: the SL's and the gate's share one range.
Status SetArgIndex(const toml::node& n, uint32_t* out) {
  if (!n.is_integer()) return InvalidArgument("must be an integer");
  int64_t v = **n.as_integer();
  if (v < 0 || v > kMaxArgIndex) {
    return InvalidArgument("must be between 0 and " + std::to_string(kMaxArgIndex) + ", got " +
                           std::to_string(v));
  }
  *out = static_cast<uint32_t>(v);
  return Status::Ok();
}

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      {"library", "string", true, "libmyrnn.so",
       "library of the SL function: a file name prefix (also matches libmyrnn.so.2) or a path",
       [](const toml::node& n, ZeroCodeProbe& p) { return SetString(n, &p.library); }},
      {"function", "string", true, "my_rnn_forward",
       "the function whose argument is the SL (its symbol; C++ names mangled)",
       [](const toml::node& n, ZeroCodeProbe& p) { return SetString(n, &p.function); }},
      {"arg", "integer", true, "2",
       "0-based index of the argument holding the SL (0-5 in registers, 6-15 on the stack)",
       [](const toml::node& n, ZeroCodeProbe& p) { return SetArgIndex(n, &p.arg_index); }},
      {"bytes", "integer", false, "4",
       "width of the argument, or of what it points at: 4 (int) or 8 (long, size_t)",
       [](const toml::node& n, ZeroCodeProbe& p) {
         if (!n.is_integer() || (**n.as_integer() != 4 && **n.as_integer() != 8)) {
           return InvalidArgument("must be 4 or 8");
         }
         p.arg_bytes = static_cast<uint32_t>(**n.as_integer());
         return Status::Ok();
       }},
      {"deref", "boolean", false, "false", "the argument points at the SL (Fortran BLAS: int* n)",
       [](const toml::node& n, ZeroCodeProbe& p) {
         if (!n.is_boolean()) return InvalidArgument("must be true or false");
         p.deref = **n.as_boolean();
         return Status::Ok();
       }},
      {"reduce", "string", false, "first",
       "which SL an iteration with several SL calls gets: first, max or last",
       [](const toml::node& n, ZeroCodeProbe& p) {
         std::string v = n.is_string() ? std::string(**n.as_string()) : "";
         if (v == "first") {
           p.reduce = probes::SlReduce::kFirst;
         } else if (v == "max") {
           p.reduce = probes::SlReduce::kMax;
         } else if (v == "last") {
           p.reduce = probes::SlReduce::kLast;
         } else {
           return InvalidArgument("must be \"first\", \"max\" or \"last\"");
         }
         return Status::Ok();
       }},
      {"window", "string", false, "calls",
       "where an iteration's window begins: calls (after the last boundary call of the previous "
       "burst) or step (at the boundary call that ended the previous iteration: windows tile the "
       "run, an iteration's time is the trainer's whole step)",
       [](const toml::node& n, ZeroCodeProbe& p) {
         std::string v = n.is_string() ? std::string(**n.as_string()) : "";
         if (v == "calls") {
           p.window = probes::ZeroCodeWindow::kCalls;
         } else if (v == "step") {
           p.window = probes::ZeroCodeWindow::kStep;
         } else {
           return InvalidArgument("must be \"calls\" or \"step\"");
         }
         return Status::Ok();
       }},
      {"boundary_library", "string", false, "",
       "library holding the boundary function; empty: the same as library",
       [](const toml::node& n, ZeroCodeProbe& p) {
         if (!n.is_string()) return InvalidArgument("must be a string");
         p.boundary_library = **n.as_string();
         return Status::Ok();
       }},
      {"boundary_function", "string", true, "my_optimizer_step",
       "function called once at the end of every iteration (e.g. the optimizer step)",
       [](const toml::node& n, ZeroCodeProbe& p) { return SetString(n, &p.boundary_function); }},
      {"gate_function", "string", false, "",
       "optional gate: the SL function's calls only record the thread's SL, and a call of this "
       "function whose argument gate_arg equals gate_value is the iteration's SL call (cuDNN 9: "
       "cudnnRNNForward, fwdMode = training); empty: no gate",
       [](const toml::node& n, ZeroCodeProbe& p) {
         if (!n.is_string()) return InvalidArgument("must be a string");
         p.gate_function = **n.as_string();
         return Status::Ok();
       }},
      {"gate_library", "string", false, "",
       "library holding the gate function; empty: the same as library",
       [](const toml::node& n, ZeroCodeProbe& p) {
         if (!n.is_string()) return InvalidArgument("must be a string");
         p.gate_library = **n.as_string();
         return Status::Ok();
       }},
      {"gate_arg", "integer", false, "0",
       "0-based index of the gate function's argument compared with gate_value",
       [](const toml::node& n, ZeroCodeProbe& p) { return SetArgIndex(n, &p.gate_arg); }},
      {"gate_value", "integer", false, "0",
       "the value (an enum or int, 0 to 4294967295) the gate's argument must have",
       [](const toml::node& n, ZeroCodeProbe& p) {
         if (!n.is_integer() || **n.as_integer() < 0 || **n.as_integer() > 0xffffffffll) {
           return InvalidArgument("must be an integer from 0 to 4294967295");
         }
         p.gate_value = static_cast<uint64_t>(**n.as_integer());
         return Status::Ok();
       }},
  };
  return fields;
}

std::string FieldNames() {
  std::string out;
  for (const Field& f : Fields()) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

Result<ZeroCodeProbe> ParseOne(const std::string& name, const toml::node& node,
                               std::string_view source) {
  const std::string key = "probes.zero_code_custom." + name;
  const std::string at = Where(source, node.source());
  if (!ValidName(name)) {
    return InvalidArgument(at + ": '" + key +
                           "': name the probe with letters, digits, '_' and '-' (" +
                           std::to_string(kMaxNameLength) + " at most)");
  }
  if (probes::FindZeroCodePreset(name).ok()) {
    return InvalidArgument(at + ": '" + key + "': '" + name +
                           "' is a preset's name: rename your probe, or enable the preset with "
                           "probes.zero_code = [\"" +
                           name + "\"]");
  }
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    return InvalidArgument(at + ": '" + key + "' must be a table ([" + key + "]) with the keys " +
                           FieldNames());
  }
  ZeroCodeProbe probe;
  probe.name = name;
  std::set<std::string_view> seen;
  for (const auto& [k, v] : *table) {
    auto field = std::find_if(Fields().begin(), Fields().end(),
                              [&](const Field& f) { return f.name == k.str(); });
    if (field == Fields().end()) {
      return InvalidArgument(Where(source, k.source()) + ": unknown key '" + key + "." +
                             std::string(k.str()) + "' (a zero-code probe has: " + FieldNames() +
                             ")");
    }
    Status st = field->set(v, probe);
    if (!st.ok()) {
      return InvalidArgument(Where(source, v.source()) + ": key '" + key + "." +
                             std::string(field->name) + "' " + st.message() + " (" +
                             std::string(field->doc) + ")");
    }
    seen.insert(field->name);
  }
  for (const Field& f : Fields()) {
    if (f.required && seen.count(f.name) == 0) {
      return InvalidArgument(at + ": '" + key + "' has no " + std::string(f.name) + ": set " +
                             std::string(f.name) + " = <" + std::string(f.type) + ">, " +
                             std::string(f.doc));
    }
  }
  Status st = probes::ValidateZeroCodeProbe(probe);  // an absolute library path must exist
  if (!st.ok()) return InvalidArgument(at + ": '" + key + "': " + st.message());
  return probe;
}

}  // namespace

std::string ZeroCodePresetNamesToml(const std::vector<std::string>& names) {
  std::string out = "[";
  for (const std::string& n : names) out += (out.size() > 1 ? ", \"" : "\"") + n + "\"";
  return out + "]";
}

Status SetZeroCodePresetNames(const toml::node& value, std::vector<std::string>* out) {
  const toml::array* a = value.as_array();
  if (a == nullptr) return InvalidArgument("must be an array of preset names");
  std::vector<std::string> names;
  for (const toml::node& e : *a) {
    if (!e.is_string()) return InvalidArgument("must be an array of preset names (strings)");
    std::string name(**e.as_string());
    if (!probes::FindZeroCodePreset(name).ok()) {
      return InvalidArgument("names no zero-code preset '" + name + "' (presets: " + PresetNames() +
                             "; a probe of your own goes in [probes.zero_code_custom.NAME])");
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return InvalidArgument("lists '" + name + "' twice: remove one");
    }
    names.push_back(std::move(name));
  }
  *out = std::move(names);
  return Status::Ok();
}

Status ParseZeroCodeCustom(const toml::node& value, std::string_view source,
                           std::vector<ZeroCodeProbe>* out) {
  const toml::table* table = value.as_table();
  if (table == nullptr) {
    return InvalidArgument(Where(source, value.source()) +
                           ": 'probes.zero_code_custom' must be a table of probe tables "
                           "([probes.zero_code_custom.NAME] with the keys " +
                           FieldNames() + ")");
  }
  std::vector<ZeroCodeProbe> probes;
  for (const auto& [name, node] : *table) {
    auto probe = ParseOne(std::string(name.str()), node, source);
    if (!probe.ok()) return probe.status();
    probes.push_back(std::move(*probe));
  }
  *out = std::move(probes);
  return Status::Ok();
}

std::vector<ConfigKeyDoc> ZeroCodeCustomKeyDocs() {
  // ConfigKeyDoc holds views: the composed keys and types live as long as the program.
  static const std::vector<std::pair<std::string, std::string>> names = [] {
    std::vector<std::pair<std::string, std::string>> v;
    for (const Field& f : Fields()) {
      v.emplace_back("probes.zero_code_custom.<name>." + std::string(f.name),
                     (f.required ? "required " : "") + std::string(f.type) +
                         (f.required ? ", example value" : ""));
    }
    return v;
  }();
  std::vector<ConfigKeyDoc> out;
  for (size_t i = 0; i < Fields().size(); ++i) {
    const Field& f = Fields()[i];
    // Rendered by the one helper the daemon's key table uses, so both escape alike.
    const std::string value =
        f.type == "string" ? TomlQuote(std::string(f.example)) : std::string(f.example);
    out.push_back({names[i].first, names[i].second, value, f.doc});
  }
  return out;
}

Status ValidateZeroCodeConfig(const DaemonConfig& config) {
  for (const std::string& name : config.probes_zero_code) {
    auto preset = probes::FindZeroCodePreset(name);
    if (!preset.ok()) return preset.status().WithContext("probes.zero_code");
  }
  for (const ZeroCodeProbe& p : config.probes_zero_code_custom) {
    if (probes::FindZeroCodePreset(p.name).ok()) {
      return InvalidArgument("probes.zero_code_custom." + p.name +
                             ": the name is a preset's: rename the probe");
    }
    SEQPOINT_RETURN_IF_ERROR(
        probes::ValidateZeroCodeProbe(p).WithContext("probes.zero_code_custom." + p.name));
  }
  size_t total = config.probes_zero_code.size() + config.probes_zero_code_custom.size();
  if (total > SP_MAX_ZERO_CODE_PROBES) {
    return InvalidArgument(std::to_string(total) +
                           " zero-code probes configured (probes.zero_code and "
                           "probes.zero_code_custom); at most " +
                           std::to_string(SP_MAX_ZERO_CODE_PROBES) + ": remove some");
  }
  return Status::Ok();
}

Result<std::vector<ZeroCodeProbe>> ResolveZeroCodeProbes(const DaemonConfig& config) {
  SEQPOINT_RETURN_IF_ERROR(ValidateZeroCodeConfig(config));
  std::vector<ZeroCodeProbe> custom = config.probes_zero_code_custom;
  std::sort(custom.begin(), custom.end(),
            [](const ZeroCodeProbe& a, const ZeroCodeProbe& b) { return a.name < b.name; });
  std::vector<ZeroCodeProbe> out = std::move(custom);
  for (const std::string& name : config.probes_zero_code) {
    auto preset = probes::FindZeroCodePreset(name);
    if (!preset.ok()) return preset.status();
    out.push_back(std::move(*preset));
  }
  return out;
}

}  // namespace seqpoint::daemon
