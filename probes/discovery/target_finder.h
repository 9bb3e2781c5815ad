// Decides what to attach in one process: the seqpoint USDT provider wherever it is mapped (the
// executable or a library such as libseqpoint_usdt.so); only in a process without it, each
// zero-code probe whose SL and boundary functions are both present in mapped libraries (one
// without the other would only cost the job uprobe hits that never form an iteration).
//
// Files are opened as Mapping::open_path says, which reaches binaries inside containers and
// chroots, and deleted ones. ELF answers are cached by (device, inode, size, mtime), so examining
// the 8 ranks of one job reads each binary once. Not thread-safe; one owner thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "probes/discovery/proc_reader.h"
#include "probes/zero_code_probe.h"
#include "common/status.h"

namespace seqpoint::probes {

struct AttachTarget {
  enum class Kind { kUsdt, kSlFunction, kBoundaryFunction, kGateFunction };
  Kind kind = Kind::kUsdt;
  uint32_t probe = 0;       // zero-code probe index (the function kinds)
  std::string mapped_path;  // as the process sees it (/proc/PID/maps)
  std::string open_path;    // as the agent opens it (Mapping::open_path)
  std::string function;     // zero-code symbol
  // Identifies the attachment within a process, e.g. "usdt:/usr/lib/libseqpoint_usdt.so".
  std::string Key() const;
};

struct ProcessTargets {
  ProcessIdentity identity;
  std::string exe;  // mapped path of the first executable mapping
  std::vector<AttachTarget> targets;
  // Why a configured probe was not chosen although its library is mapped (no symbol, ...).
  std::vector<std::string> notes;
};

class TargetFinder {
 public:
  TargetFinder(std::string proc_root, std::vector<ZeroCodeProbe> zero_code);

  // NotFound when the process is gone; otherwise the (possibly empty) targets.
  Result<ProcessTargets> Find(int pid);

  const std::string& proc_root() const { return proc_root_; }
  const std::vector<ZeroCodeProbe>& zero_code() const { return zero_code_; }

 private:
  using FileKey = std::tuple<uint64_t, uint64_t, int64_t, int64_t, int64_t>;
  Result<bool> CarriesProvider(const std::string& open_path);
  Result<bool> DefinesFunction(const std::string& open_path, const std::string& function);
  // First mapped file matching `library` that defines `function`; null when none.
  const Mapping* FindFunction(const std::vector<Mapping>& mapped, const std::string& library,
                              const std::string& function, const std::string& probe_name,
                              std::vector<std::string>* notes);

  std::string proc_root_;
  std::vector<ZeroCodeProbe> zero_code_;
  std::map<FileKey, bool> provider_cache_;
  std::map<std::pair<FileKey, std::string>, bool> symbol_cache_;
};

}  // namespace seqpoint::probes
