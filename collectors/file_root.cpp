#include "collectors/file_root.h"

#include "common/file_error.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace seqpoint::collectors {

std::string FileRoot::Path(std::string_view relative) const {
  std::string p = root_;
  if (!p.empty() && p.back() != '/') p += '/';
  while (!relative.empty() && relative.front() == '/') relative.remove_prefix(1);
  p += relative;
  return p;
}

Result<std::string> FileRoot::ReadString(std::string_view relative) const {
  const std::string path = Path(relative);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileErrorStatus(errno, FileOp::kOpen, path);
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return FileErrorStatus(err, FileOp::kRead, path);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > (1u << 20)) break;  // sysfs attributes are one page; never grow unbounded
  }
  ::close(fd);
  while (!text.empty() && (text.back() == '\0' || text.back() == '\n' || text.back() == ' ' ||
                           text.back() == '\t' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

Result<uint64_t> ParseUint64(std::string_view text, std::string_view what) {
  int base = 10;
  std::string_view digits = text;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
    return IoError(std::string(what) + ": expected an unsigned integer, read '" +
                   std::string(text.substr(0, 40)) + "'");
  }
  return v;
}

Result<uint64_t> FileRoot::ReadUint64(std::string_view relative) const {
  Result<std::string> text = ReadString(relative);
  if (!text.ok()) return text.status();
  return ParseUint64(*text, Path(relative));
}

Result<std::vector<std::string>> FileRoot::ListDir(std::string_view relative) const {
  const std::string path = Path(relative);
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return FileErrorStatus(errno, FileOp::kList, path);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

bool FileRoot::Exists(std::string_view relative) const {
  struct stat st;
  return ::stat(Path(relative).c_str(), &st) == 0;
}

}  // namespace seqpoint::collectors
