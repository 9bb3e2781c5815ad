// Reads small sysfs/procfs files below an injectable root (docs/architecture.md, Conventions): production uses
// "/sys" and "/proc", tests a fixture tree of real captured files. Every collector's file read
// goes through here, so each failure maps to one Status that names the file and the fix
// (common/file_error.h).
//
// Threads: immutable after construction; safe to share.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace seqpoint::collectors {

class FileRoot {
 public:
  explicit FileRoot(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  // root + "/" + relative (relative has no leading slash: "class/powercap").
  std::string Path(std::string_view relative) const;

  // The file's text with trailing whitespace and NUL padding removed (sysfs attributes end
  // in '\n'; some captured dumps are NUL-padded to the 4 KiB page).
  Result<std::string> ReadString(std::string_view relative) const;
  // A decimal (or 0x-prefixed hex) unsigned integer; garbage is an IoError naming the file.
  Result<uint64_t> ReadUint64(std::string_view relative) const;
  // Entry names of a directory (no "." or ".."), sorted.
  Result<std::vector<std::string>> ListDir(std::string_view relative) const;
  bool Exists(std::string_view relative) const;

 private:
  std::string root_;
};

// Parses a whole string as an unsigned integer (decimal or 0x hex).
Result<uint64_t> ParseUint64(std::string_view text, std::string_view what);

}  // namespace seqpoint::collectors
