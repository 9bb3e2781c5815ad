// See proc_reader.h. Formats: proc(5) for maps ("start-end perms offset dev inode   path") and
// stat (field 2 is "(comm)" and may hold spaces or parentheses, so fields are counted after the
// last ')').
#include "probes/discovery/proc_reader.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

namespace seqpoint::probes {
namespace {

Status OpenError(const std::string& path, int err, int pid) {
  std::string msg = "reading " + path + ": " + std::strerror(err);
  if (err == ENOENT || err == ESRCH)
    return NotFound(msg + " (process " + std::to_string(pid) + " is gone or never existed)");
  if (err == EACCES || err == EPERM) {
    return PermissionDenied(msg + (geteuid() == 0 ? ": denied even to root (the process may be "
                                                    "in another user namespace, or protected)"
                                                  : ": run as root"));
  }
  return IoError(msg);
}

std::string ProcFile(const std::string& proc_root, int pid, const char* name) {
  return proc_root + "/" + std::to_string(pid) + "/" + name;
}

}  // namespace

namespace {

// "00401000-004a2000" (maps) -> "401000-4a2000" (the name of its map_files entry).
std::string MapFilesName(const std::string& range) {
  size_t dash = range.find('-');
  if (dash == std::string::npos) return range;
  auto strip = [](std::string v) {
    size_t nz = v.find_first_not_of('0');
    return nz == std::string::npos ? std::string("0") : v.substr(nz);
  };
  return strip(range.substr(0, dash)) + "-" + strip(range.substr(dash + 1));
}

// The first candidate that is the mapped inode; else the first that exists; else the first.
std::string ResolveMapping(const std::vector<std::string>& candidates, uint64_t inode) {
  const std::string* existing = nullptr;
  for (const std::string& c : candidates) {
    struct stat st {};
    if (stat(c.c_str(), &st) != 0) continue;
    if (static_cast<uint64_t>(st.st_ino) == inode) return c;
    if (existing == nullptr) existing = &c;
  }
  return existing != nullptr ? *existing : candidates.front();
}

}  // namespace

Result<std::vector<Mapping>> ReadExecutableMappings(const std::string& proc_root, int pid) {
  std::string path = ProcFile(proc_root, pid, "maps");
  std::ifstream in(path);
  if (!in) return OpenError(path, errno, pid);
  std::vector<Mapping> files;
  std::string line;
  while (std::getline(in, line)) {
    // Six fields; the path (sixth) may contain spaces, so take everything after the fifth.
    std::istringstream fields(line);
    std::string range, perms, offset, dev;
    uint64_t inode = 0;
    if (!(fields >> range >> perms >> offset >> dev >> inode)) continue;
    if (perms.size() < 3 || perms[2] != 'x') continue;
    std::string file;
    std::getline(fields, file);
    size_t start = file.find_first_not_of(' ');
    if (start == std::string::npos) continue;
    file.erase(0, start);
    if (file.empty() || file[0] != '/') continue;  // [vdso], anonymous memory
    Mapping m;
    static constexpr std::string_view kDeleted = " (deleted)";
    if (file.size() > kDeleted.size() && file.ends_with(kDeleted)) {
      file.resize(file.size() - kDeleted.size());
      m.deleted = true;
    }
    bool seen = false;
    for (const Mapping& f : files) seen = seen || f.path == file;
    if (seen) continue;
    m.path = file;
    std::string map_files = ProcFile(proc_root, pid, "map_files/") + MapFilesName(range);
    if (m.deleted) {
      m.open_path = map_files;
    } else {
      m.open_path = ResolveMapping({PathInRoot(proc_root, pid, file), file, map_files}, inode);
    }
    files.push_back(std::move(m));
  }
  return files;
}

Result<ProcessIdentity> ReadProcessIdentity(const std::string& proc_root, int pid) {
  std::string path = ProcFile(proc_root, pid, "stat");
  std::ifstream in(path);
  if (!in) return OpenError(path, errno, pid);
  // std::getline, not istreambuf_iterator: a read error (ESRCH once the process has exited)
  // then sets badbit instead of throwing from basic_filebuf::underflow through libbpf's C frames.
  std::string stat;
  std::getline(in, stat, '\0');
  size_t open = stat.find('(');
  size_t close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    return InvalidArgument(path + ": no '(comm)' field; not a proc(5) stat file");
  }
  ProcessIdentity id;
  id.pid = pid;
  id.comm = stat.substr(open + 1, close - open - 1);
  // Fields after ')' start at field 3 (state); starttime is field 22.
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && (rest >> field); ++i) {
    if (i == 3) id.state = field.empty() ? '?' : field[0];
    if (i != 22) continue;
    auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), id.start_time);
    if (ec != std::errc()) return InvalidArgument(path + ": field 22 (starttime) not a number");
    return id;
  }
  return InvalidArgument(path + ": fewer than 22 fields; not a proc(5) stat file");
}

Result<std::vector<int>> ListPids(const std::string& proc_root) {
  DIR* dir = opendir(proc_root.c_str());
  if (dir == nullptr) {
    return IoError("listing " + proc_root + ": " + std::strerror(errno) +
                   " (is procfs mounted there?)");
  }
  std::vector<int> pids;
  while (dirent* entry = readdir(dir)) {
    int pid = 0;
    std::string_view name(entry->d_name);
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec == std::errc() && ptr == name.data() + name.size() && pid > 0) pids.push_back(pid);
  }
  closedir(dir);
  std::sort(pids.begin(), pids.end());
  return pids;
}

std::string PathInRoot(const std::string& proc_root, int pid, const std::string& path) {
  return proc_root + "/" + std::to_string(pid) + "/root" + path;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace seqpoint::probes
