// See libbpf_util.h.
#include "probes/libbpf_util.h"

#include <bpf/libbpf.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace seqpoint::probes {
namespace {

thread_local std::string t_log;
bool g_debug = false;

int CapturePrint(enum libbpf_print_level level, const char* format, va_list args) {
  char line[1024];
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(line, sizeof(line), format, copy);
  va_end(copy);
  if (n < 0) return 0;
  if (g_debug) std::fputs(line, stderr);
  if (level != LIBBPF_WARN) return 0;
  if (t_log.size() < 4096) {
    std::string_view text(line);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
    if (!t_log.empty()) t_log += "; ";
    t_log.append(text);
  }
  return 0;
}

}  // namespace

void LinkDeleter::operator()(bpf_link* link) const { bpf_link__destroy(link); }
void RingBufferDeleter::operator()(ring_buffer* rb) const { ring_buffer__free(rb); }

void InstallLibbpfLogCapture() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* debug = std::getenv("SEQPOINT_LIBBPF_DEBUG");
    g_debug = debug != nullptr && debug[0] == '1';
    libbpf_set_print(CapturePrint);
  });
}

void ClearLibbpfLog() { t_log.clear(); }

std::string TakeLibbpfLog() {
  std::string out;
  out.swap(t_log);
  return out;
}

Status CheckBpfCapabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) {
    return Internal(std::string("capget: ") + std::strerror(errno));
  }
  auto has = [&](int cap) { return (data[cap / 32].effective & (1u << (cap % 32))) != 0; };
  // CAP_BPF (39) and CAP_PERFMON (38) postdate some libc headers; use the numbers.
  constexpr int kCapPerfmon = 38, kCapBpf = 39;
  if (has(CAP_SYS_ADMIN) || (has(kCapBpf) && has(kCapPerfmon))) return Status::Ok();
  return PermissionDenied(
      "loading eBPF probes needs root, or CAP_BPF, CAP_PERFMON and "
      "CAP_SYS_ADMIN (uprobes); this process (uid " +
      std::to_string(geteuid()) + ") has none of them: run as root");
}

Status LibbpfError(std::string_view what, int err) {
  if (err < 0) err = -err;
  std::string message(what);
  message += ": ";
  message += std::strerror(err);
  std::string log = TakeLibbpfLog();
  if (!log.empty()) message += " (libbpf: " + log + ")";
  switch (err) {
    case EPERM:
    case EACCES:
      return PermissionDenied(message +
                              ". Loading and attaching eBPF probes needs root, or CAP_BPF, "
                              "CAP_PERFMON and CAP_SYS_ADMIN: run as root");
    case ENOENT:
    case ESRCH:
      return NotFound(message);
    case ENOSYS:
    case EOPNOTSUPP:
      return Unsupported(message +
                         ". This kernel lacks a needed eBPF feature (BTF, ring buffer, uprobe "
                         "cookies: Linux 5.15 or newer with CONFIG_DEBUG_INFO_BTF=y)");
    case EBUSY:
    case EAGAIN:
    case ENOSPC:
    case E2BIG:
    case ENOMEM:
      return Unavailable(message);
    default:
      return Internal(message);
  }
}

}  // namespace seqpoint::probes
