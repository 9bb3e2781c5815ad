// Bounded reads of sysfs attributes under an injectable root, with the failure modes of real
// drivers mapped to the project's Status codes by common/file_error.h.
// Files are opened O_NONBLOCK so that a FIFO or other odd file in a bogus root cannot block the
// caller; sysfs attributes ignore the flag. Reads go into the caller's fixed buffer: no
// allocation on the hot path. Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace seqpoint::firmware {

// The directory that stands for "/" (tests point it at a fixture tree).
class SysfsRoot {
 public:
  explicit SysfsRoot(std::string root);
  const std::string& root() const { return root_; }
  // root + "/" + relative, e.g. Path("sys/class/drm").
  std::string Path(std::string_view relative) const;

 private:
  std::string root_;
};

// Reads up to buf.size() bytes of `path` (one open/read.../close). `filled` (optional) is set
// when the buffer filled up, i.e. the file may hold more.
Result<size_t> ReadFileBounded(const std::string& path, std::span<uint8_t> buf,
                               bool* filled = nullptr);

// A decimal integer attribute ("12345\n"), as hwmon writes them.
Result<int64_t> ReadIntegerFile(const std::string& path);
// A short text attribute with trailing whitespace removed (labels, names, "0x1002").
Result<std::string> ReadTextFile(const std::string& path, size_t max_bytes = 256);

}  // namespace seqpoint::firmware
