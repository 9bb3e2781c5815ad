#include "agent/cli/cli_args.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace seqpoint::cli {

std::optional<std::string> ParsedArgs::Get(std::string_view name) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

Result<std::optional<double>> ParsedArgs::GetDouble(std::string_view name) const {
  auto v = Get(name);
  if (!v) return std::optional<double>();
  char* end = nullptr;
  double d = std::strtod(v->c_str(), &end);
  if (v->empty() || end != v->c_str() + v->size()) {
    return InvalidArgument(std::string(name) + " needs a number, got '" + *v + "'");
  }
  return std::optional<double>(d);
}

Result<std::optional<long long>> ParsedArgs::GetInt(std::string_view name) const {
  auto v = Get(name);
  if (!v) return std::optional<long long>();
  long long n = 0;
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || ptr != v->data() + v->size()) {
    return InvalidArgument(std::string(name) + " needs an integer, got '" + *v + "'");
  }
  return std::optional<long long>(n);
}

Result<ParsedArgs> ParseArgs(Args args, const std::vector<OptionSpec>& specs) {
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a.size() < 2 || a.substr(0, 2) != "--") {
      out.positional_.emplace_back(a);
      continue;
    }
    std::string_view name = a;
    std::optional<std::string> inline_value;
    if (auto eq = a.find('='); eq != std::string_view::npos) {
      name = a.substr(0, eq);
      inline_value = std::string(a.substr(eq + 1));
    }
    if (name == "--help") {
      out.values_["--help"] = "";
      continue;
    }
    const OptionSpec* spec = nullptr;
    for (const auto& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      return InvalidArgument("unknown option '" + std::string(name) + "' (see --help)");
    }
    if (!spec->takes_value) {
      if (inline_value) {
        return InvalidArgument("option '" + std::string(name) + "' takes no value");
      }
      out.values_[std::string(name)] = "";
      continue;
    }
    if (inline_value) {
      out.values_[std::string(name)] = *inline_value;
    } else if (i + 1 < args.size()) {
      out.values_[std::string(name)] = args[++i];
    } else {
      return InvalidArgument("option '" + std::string(name) + "' needs a value");
    }
  }
  return out;
}

void PrintHelp(std::string_view usage_line, std::string_view description,
               const std::vector<OptionSpec>& specs) {
  std::printf("usage: seqpoint %.*s\n%.*s\n\noptions:\n", static_cast<int>(usage_line.size()),
              usage_line.data(), static_cast<int>(description.size()), description.data());
  for (const auto& s : specs) {
    std::string left(s.name);
    if (s.takes_value) left += " " + std::string(s.value_name);
    std::printf("  %-26s %.*s\n", left.c_str(), static_cast<int>(s.help.size()), s.help.data());
  }
  std::printf("  %-26s %s\n", "--help", "show this help");
}

}  // namespace seqpoint::cli
