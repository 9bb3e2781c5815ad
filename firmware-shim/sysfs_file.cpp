#include "firmware-shim/sysfs_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "common/file_error.h"

namespace seqpoint::firmware {

SysfsRoot::SysfsRoot(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  if (root_.empty()) root_ = "/";
}

std::string SysfsRoot::Path(std::string_view relative) const {
  while (!relative.empty() && relative.front() == '/') relative.remove_prefix(1);
  std::string out = root_;
  if (out.back() != '/') out += '/';
  out += relative;
  return out;
}

Result<size_t> ReadFileBounded(const std::string& path, std::span<uint8_t> buf, bool* filled) {
  if (filled != nullptr) *filled = false;
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return FileErrorStatus(errno, FileOp::kOpen, path);
  size_t total = 0;
  int interrupted = 0;
  while (total < buf.size()) {
    const ssize_t n = ::read(fd, buf.data() + total, buf.size() - total);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR && ++interrupted < 8) continue;
      ::close(fd);
      return FileErrorStatus(err, FileOp::kRead, path);
    }
    if (n == 0) break;
    total += static_cast<size_t>(n);
  }
  ::close(fd);
  if (filled != nullptr) *filled = total == buf.size();
  return total;
}

Result<std::string> ReadTextFile(const std::string& path, size_t max_bytes) {
  char buf[512];
  const size_t cap = max_bytes < sizeof(buf) ? max_bytes : sizeof(buf);
  auto n = ReadFileBounded(path, {reinterpret_cast<uint8_t*>(buf), cap});
  if (!n.ok()) return n.status();
  size_t len = *n;
  while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' ' || buf[len - 1] == '\t' ||
                     buf[len - 1] == '\r' || buf[len - 1] == '\0')) {
    --len;
  }
  return std::string(buf, len);
}

Result<int64_t> ReadIntegerFile(const std::string& path) {
  char buf[64];
  auto n = ReadFileBounded(path, {reinterpret_cast<uint8_t*>(buf), sizeof(buf)});
  if (!n.ok()) return n.status();
  const char* begin = buf;
  const char* end = buf + *n;
  while (begin < end && (*begin == ' ' || *begin == '\t')) ++begin;
  while (end > begin && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\r' || end[-1] == '\0'))
    --end;
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (begin == end || ec != std::errc() || ptr != end) {
    return InvalidArgument(path + ": expected a decimal integer, got '" +
                           std::string(begin, static_cast<size_t>(end - begin)) +
                           "' (broken driver or not a hwmon attribute)");
  }
  return value;
}

}  // namespace seqpoint::firmware
