// See probe_pins.h.
#include "probes/probe_pins.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "probes/libbpf_util.h"

namespace seqpoint::probes {
namespace {

bool OnBpffs(const std::string& path) {
  struct statfs fs {};
  return statfs(path.c_str(), &fs) == 0 && static_cast<uint64_t>(fs.f_type) == BPF_FS_MAGIC;
}

std::string Parent(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return Status::Ok();
  return LibbpfError("creating the pin directory " + path, errno);
}

Status MakeDirs(const std::string& path) {
  if (path.empty() || path == "/") return Status::Ok();
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) return Status::Ok();
  SEQPOINT_RETURN_IF_ERROR(MakeDirs(Parent(path)));
  return MakeDir(path);
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  closedir(d);
  return out;
}

bool IsDir(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

Status EnsureBpffs(const std::string& root) {
  const std::string mount_point = Parent(root);
  if (OnBpffs(mount_point)) return Status::Ok();
  if (mount_point != "/sys/fs/bpf") {
    return Unavailable("probes.pin_dir " + root + ": " + mount_point +
                       " is not a bpffs; mount one there (mount -t bpf bpf " + mount_point +
                       ") or put pin_dir under /sys/fs/bpf");
  }
  if (mount("bpf", mount_point.c_str(), "bpf", 0, "mode=0700") != 0) {
    return LibbpfError("mounting bpffs at /sys/fs/bpf (mount -t bpf bpf /sys/fs/bpf as root)",
                       errno);
  }
  return Status::Ok();
}

std::string EscapePinName(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2f";
    } else if (c == '.') {  // bpffs refuses dots in names (kept for its own files)
      out += "%2e";
    } else {
      out += c;
    }
  }
  return out;
}

std::string UnescapePinName(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && name.compare(i, 3, "%25") == 0) {
      out += '%';
      i += 2;
    } else if (name[i] == '%' && name.compare(i, 3, "%2f") == 0) {
      out += '/';
      i += 2;
    } else if (name[i] == '%' && name.compare(i, 3, "%2e") == 0) {
      out += '.';
      i += 2;
    } else {
      out += name[i];
    }
  }
  return out;
}

uint64_t PinHash(const void* data, size_t size, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::string InstancePinDir(const std::string& root, const std::string& state_dir) {
  std::string name = EscapePinName(state_dir);
  if (name.size() > 200) {  // NAME_MAX is 255: a long path gets a hash
    char hex[24];
    std::snprintf(hex, sizeof(hex), "#%016" PRIx64, PinHash(state_dir.data(), state_dir.size()));
    name = hex;
  }
  return root + "/" + name;
}

std::vector<SweptInstance> SweepOrphanInstances(const std::string& root,
                                                const std::string& self_state_dir,
                                                const std::string& state_db_name) {
  std::vector<SweptInstance> swept;
  const std::string self = InstancePinDir(root, self_state_dir);
  for (const std::string& name : Entries(root)) {
    const std::string tree = root + "/" + name;
    if (tree == self || name.empty() || name[0] == '#') continue;
    struct stat st {};
    if (stat(tree.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    const std::string state_dir = UnescapePinName(name);
    std::string why;
    struct stat sd {};
    if (state_dir.empty() || state_dir[0] != '/') {
      continue;  // not a tree of ours
    } else if (stat(state_dir.c_str(), &sd) != 0) {
      why = "its state directory no longer exists";
    } else if (!S_ISDIR(sd.st_mode)) {
      why = "its state directory is not a directory";
    } else if (access((state_dir + "/" + state_db_name).c_str(), F_OK) != 0) {
      why = "its state directory holds no " + state_db_name + " (not a seqpointd's)";
    } else {
      continue;  // its daemon may come back for it
    }
    auto removed = RemovePinTree(tree);
    swept.push_back({state_dir, why, removed.ok() ? *removed : 0});
  }
  return swept;
}

Result<ProbePins> ProbePins::Open(const std::string& root, const std::string& instance,
                                  uint64_t generation) {
  ProbePins pins;
  pins.instance_dir_ = InstancePinDir(root, instance);
  char gen[24];
  std::snprintf(gen, sizeof(gen), "%016" PRIx64, generation);
  pins.dir_ = pins.instance_dir_ + "/" + gen;
  SEQPOINT_RETURN_IF_ERROR(MakeDirs(pins.dir_));
  return pins;
}

std::vector<std::string> ProbePins::OtherGenerations() const {
  std::vector<std::string> out;
  for (const std::string& name : Entries(instance_dir_)) {
    std::string path = instance_dir_ + "/" + name;
    if (path != dir_ && IsDir(path)) out.push_back(path);
  }
  return out;
}

std::string ProbePins::PidDir(int pid, uint64_t start_time) const {
  return dir_ + "/pid_" + std::to_string(pid) + "_" + std::to_string(start_time);
}

std::vector<PinnedPid> ProbePins::ListPids(const std::string& dir) const {
  const std::string gen = dir.empty() ? dir_ : dir;
  std::vector<PinnedPid> out;
  for (const std::string& name : Entries(gen)) {
    int pid = 0;
    unsigned long long start = 0;
    if (std::sscanf(name.c_str(), "pid_%d_%llu", &pid, &start) != 2) continue;
    PinnedPid p{pid, start, gen + "/" + name, {}};
    for (const std::string& link : Entries(p.dir)) {
      size_t at = link.rfind('@');
      if (at == std::string::npos) continue;
      p.links.push_back({UnescapePinName(link.substr(0, at)), p.dir + "/" + link});
    }
    out.push_back(std::move(p));
  }
  return out;
}

Status ProbePins::PinLinks(int pid, uint64_t start_time, const std::string& key,
                           const std::set<int>& fds) {
  const std::string dir = PidDir(pid, start_time);
  SEQPOINT_RETURN_IF_ERROR(MakeDir(dir));
  int i = 0;
  for (int fd : fds) {
    std::string path = dir + "/" + EscapePinName(key) + "@" + std::to_string(i++);
    if (bpf_obj_pin(fd, path.c_str()) != 0 && errno != EEXIST) {
      return LibbpfError("pinning a probe link of pid " + std::to_string(pid) + " at " + path,
                         errno);
    }
  }
  return Status::Ok();
}

void ProbePins::RemovePid(int pid, uint64_t start_time) {
  (void)RemovePinTree(PidDir(pid, start_time));
}

Result<int> RemovePinTree(const std::string& dir) {
  if (!IsDir(dir)) return 0;
  int removed = 0;
  for (const std::string& name : Entries(dir)) {
    std::string path = dir + "/" + name;
    if (IsDir(path)) {
      auto n = RemovePinTree(path);
      if (!n.ok()) return n.status();
      removed += *n;
    } else if (unlink(path.c_str()) == 0) {
      ++removed;
    } else if (errno != ENOENT) {
      return LibbpfError("removing the pin " + path, errno);
    }
  }
  if (rmdir(dir.c_str()) != 0 && errno != ENOENT) {
    return LibbpfError("removing the pin directory " + dir, errno);
  }
  return removed;
}

std::set<int> OpenLinkFds() {
  std::set<int> out;
  for (const std::string& name : Entries("/proc/self/fd")) {
    char target[64] = {0};
    std::string path = "/proc/self/fd/" + name;
    ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
    if (n > 0 && std::strcmp(target, "anon_inode:bpf_link") == 0) out.insert(std::stoi(name));
  }
  return out;
}

}  // namespace seqpoint::probes
