// A small, strict command-line parser shared by every `seqpoint` subcommand: options are
// declared up front, unknown options and missing values are usage errors naming the option.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cli/commands.h"
#include "common/status.h"

namespace seqpoint::cli {

struct OptionSpec {
  std::string_view name;  // "--budget"
  bool takes_value;       // false: a flag
  std::string_view help;  // one line, shown by --help
  // What the value is, shown by --help after the name: N, F, P, FILE, PID, S, DIR, ...
  std::string_view value_name = "VALUE";
};

class ParsedArgs {
 public:
  bool Has(std::string_view name) const { return values_.count(std::string(name)) > 0; }
  std::optional<std::string> Get(std::string_view name) const;
  // Typed getters: an unparsable value is an error naming the option.
  Result<std::optional<double>> GetDouble(std::string_view name) const;
  Result<std::optional<long long>> GetInt(std::string_view name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend Result<ParsedArgs> ParseArgs(Args, const std::vector<OptionSpec>&);
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// Accepts "--name value" and "--name=value"; "--help" is always accepted as a flag.
Result<ParsedArgs> ParseArgs(Args args, const std::vector<OptionSpec>& specs);

// Prints "usage: seqpoint <usage_line>" then one line per option, to stdout.
void PrintHelp(std::string_view usage_line, std::string_view description,
               const std::vector<OptionSpec>& specs);

}  // namespace seqpoint::cli
