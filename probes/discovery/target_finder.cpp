// See target_finder.h.
#include "probes/discovery/target_finder.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "probes/discovery/elf_file.h"

namespace seqpoint::probes {
namespace {

// Caches are bounded: a node that runs many short-lived distinct binaries must not grow us.
constexpr size_t kMaxCacheEntries = 8192;

bool StatKey(const std::string& path,
             std::tuple<uint64_t, uint64_t, int64_t, int64_t, int64_t>* key) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return false;
  *key = {st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
  return true;
}

}  // namespace

std::string AttachTarget::Key() const {
  switch (kind) {
    case Kind::kUsdt:
      return "usdt:" + mapped_path;
    case Kind::kSlFunction:
      return "sl:" + std::to_string(probe) + ":" + mapped_path;
    case Kind::kBoundaryFunction:
      return "boundary:" + std::to_string(probe) + ":" + mapped_path;
    case Kind::kGateFunction:
      return "gate:" + std::to_string(probe) + ":" + mapped_path;
  }
  return mapped_path;
}

TargetFinder::TargetFinder(std::string proc_root, std::vector<ZeroCodeProbe> zero_code)
    : proc_root_(std::move(proc_root)), zero_code_(std::move(zero_code)) {}

Result<bool> TargetFinder::CarriesProvider(const std::string& open_path) {
  FileKey key;
  if (!StatKey(open_path, &key)) return NotFound(open_path + ": " + std::strerror(errno));
  auto it = provider_cache_.find(key);
  if (it != provider_cache_.end()) return it->second;
  auto has = HasSeqpointProvider(open_path);
  // A file that is not a readable 64-bit ELF carries no provider; that is an answer, not an error.
  bool answer = has.ok() && *has;
  if (provider_cache_.size() >= kMaxCacheEntries) provider_cache_.clear();
  provider_cache_[key] = answer;
  return answer;
}

Result<bool> TargetFinder::DefinesFunction(const std::string& open_path,
                                           const std::string& function) {
  FileKey key;
  if (!StatKey(open_path, &key)) return NotFound(open_path + ": " + std::strerror(errno));
  auto cache_key = std::make_pair(key, function);
  auto it = symbol_cache_.find(cache_key);
  if (it != symbol_cache_.end()) return it->second;
  auto has = HasFunctionSymbol(open_path, function);
  if (!has.ok()) return has.status();
  if (symbol_cache_.size() >= kMaxCacheEntries) symbol_cache_.clear();
  symbol_cache_[cache_key] = *has;
  return *has;
}

const Mapping* TargetFinder::FindFunction(const std::vector<Mapping>& mapped,
                                          const std::string& library, const std::string& function,
                                          const std::string& probe_name,
                                          std::vector<std::string>* notes) {
  for (const Mapping& m : mapped) {
    if (!LibraryMatches(library, m.path)) continue;
    auto has = DefinesFunction(m.open_path, function);
    if (has.ok() && *has) return &m;
    notes->push_back("zero-code probe '" + probe_name + "': " + m.path +
                     (has.ok() ? " has no symbol " + function +
                                     " (a binary without symbols, or another version of the "
                                     "library; C++ names must be given mangled)"
                               : " unreadable: " + has.status().message()));
  }
  return nullptr;
}

Result<ProcessTargets> TargetFinder::Find(int pid) {
  ProcessTargets out;
  auto identity = ReadProcessIdentity(proc_root_, pid);
  if (!identity.ok()) return identity.status();
  out.identity = *identity;
  auto mapped = ReadExecutableMappings(proc_root_, pid);
  if (!mapped.ok()) return mapped.status();
  if (!mapped->empty()) out.exe = mapped->front().path;

  for (const Mapping& m : *mapped) {
    auto carries = CarriesProvider(m.open_path);
    if (carries.ok() && *carries) {
      out.targets.push_back({AttachTarget::Kind::kUsdt, 0, m.path, m.open_path, ""});
    }
  }

  // The provider gives exact iterations; zero-code probes are for processes without it (both at
  // once would report every iteration twice, and cost uprobe hits for nothing).
  if (!out.targets.empty() && !zero_code_.empty()) {
    out.notes.push_back(
        "zero-code probes not attached: the process carries the seqpoint "
        "provider");
    return out;
  }
  for (uint32_t i = 0; i < zero_code_.size(); ++i) {
    const ZeroCodeProbe& probe = zero_code_[i];
    const Mapping* sl =
        FindFunction(*mapped, probe.library, probe.function, probe.name, &out.notes);
    if (sl == nullptr) continue;
    const Mapping* boundary = FindFunction(*mapped, probe.boundary_lib(), probe.boundary_function,
                                           probe.name, &out.notes);
    if (boundary == nullptr) {
      out.notes.push_back("zero-code probe '" + probe.name + "': " + sl->path +
                          " is mapped but "
                          "its boundary " +
                          probe.boundary_function + " (" + probe.boundary_lib() +
                          ") is not (yet): waiting for it to be loaded");
      continue;
    }
    const Mapping* gate = nullptr;
    if (probe.gated()) {
      gate = FindFunction(*mapped, probe.gate_lib(), probe.gate_function, probe.name, &out.notes);
      if (gate == nullptr) {
        out.notes.push_back("zero-code probe '" + probe.name + "': its gate " +
                            probe.gate_function + " (" + probe.gate_lib() +
                            ") is not mapped (yet): waiting for it to be loaded");
        continue;
      }
    }
    out.targets.push_back(
        {AttachTarget::Kind::kSlFunction, i, sl->path, sl->open_path, probe.function});
    if (gate != nullptr) {
      out.targets.push_back(
          {AttachTarget::Kind::kGateFunction, i, gate->path, gate->open_path, probe.gate_function});
    }
    out.targets.push_back({AttachTarget::Kind::kBoundaryFunction, i, boundary->path,
                           boundary->open_path, probe.boundary_function});
  }
  return out;
}

}  // namespace seqpoint::probes
