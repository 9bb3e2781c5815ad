// `seqpoint probe [--pid PID | --all] [--duration S] [--out FILE]`: captures the iteration
// trace of training processes with the eBPF probes, without the daemon (probes/
// probe_tool.h). This file only parses arguments and handles signals. The one #if is the CLI
// command table's: builds without libbpf keep the command and say why it is missing.
#include <signal.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "agent/cli/cli_args.h"
#include "agent/cli/commands.h"
#include "seqpoint/features.h"

#if SEQPOINT_HAVE_EBPF
#include "probes/iteration_probe_skeleton.h"
#include "probes/tool/probe_tool.h"
#include "probes/zero_code_probe.h"
#endif

namespace seqpoint::cli {

#if SEQPOINT_HAVE_EBPF
namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

const std::vector<OptionSpec>& Specs() {
  static const std::vector<OptionSpec> specs = {
      {"--pid", true, "trace this process (and follow its exec, library loads and exit)", "PID"},
      {"--all", false, "trace every process carrying the provider or a configured library"},
      {"--duration", true, "stop after S seconds (default: Ctrl-C, or the --pid process exits)",
       "S"},
      {"--out", true,
       "trace file; \"{pid}\" is replaced; default stdout (--pid), "
       "seqpoint-trace.{pid}.csv (--all)",
       "FILE"},
      {"--wait", false, "--pid: wait for the process to load the provider instead of failing"},
      {"--preset", true, "zero-code presets, comma-separated (see --list-presets)", "NAMES"},
      {"--zero-code", true,
       "a zero-code probe: name=N,lib=L,fn=F,arg=I[,bytes=4|8][,deref]"
       "[,reduce=first|max|last][,boundary_lib=B],boundary=G; "
       "several separated by ';'",
       "SPEC"},
      {"--max-seq-len", true, "flag SLs above N as absurd (default 1048576)", "N"},
      {"--list-presets", false, "print the zero-code presets and exit"},
      {"--check", false,
       "count seqpoint BPF programs loaded in the kernel and exit "
       "(1 when any is left)"},
  };
  return specs;
}

Status AddZeroCode(const ParsedArgs& args, probes::ProbeToolOptions* options) {
  if (auto presets = args.Get("--preset")) {
    size_t start = 0;
    while (start <= presets->size()) {
      size_t comma = presets->find(',', start);
      std::string name = presets->substr(start, comma - start);
      if (!name.empty()) {
        auto preset = probes::FindZeroCodePreset(name);
        if (!preset.ok()) return preset.status();
        options->zero_code.push_back(*preset);
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (auto specs = args.Get("--zero-code")) {
    size_t start = 0;
    while (start <= specs->size()) {
      size_t semi = specs->find(';', start);
      std::string spec = specs->substr(start, semi - start);
      if (!spec.empty()) {
        auto probe = probes::ParseZeroCodeSpec(spec);
        if (!probe.ok()) return probe.status();
        options->zero_code.push_back(*probe);
      }
      if (semi == std::string::npos) break;
      start = semi + 1;
    }
  }
  return Status::Ok();
}

void ListPresets() {
  for (const probes::ZeroCodeProbe& p : probes::ZeroCodePresets()) {
    std::printf("%-16s %s\n  SL: %s(arg %u%s) in %s*; boundary: %s in %s*\n", p.name.c_str(),
                p.description.c_str(), p.function.c_str(), p.arg_index,
                p.deref ? ", by pointer" : "", p.library.c_str(), p.boundary_function.c_str(),
                p.boundary_lib().c_str());
  }
}

}  // namespace

int RunProbeCommand(Args argv) {
  auto args = ParseArgs(argv, Specs());
  if (!args.ok()) {
    std::fprintf(stderr, "seqpoint probe: %s\n", args.status().message().c_str());
    return 2;
  }
  if (args->Has("--help")) {
    PrintHelp("probe [--pid PID | --all] [--duration S] [--out FILE]",
              "Attaches the iteration probes (USDT provider seqpoint, zero-code uprobes) and "
              "writes each process's iteration trace (seq_len, batch, tokens, time_ns) for "
              "'seqpoint select'. Needs root.",
              Specs());
    return 0;
  }
  if (args->Has("--list-presets")) {
    ListPresets();
    return 0;
  }
  if (args->Has("--check")) {
    auto loaded = probes::CountLoadedSeqpointPrograms();
    if (!loaded.ok()) {
      std::fprintf(stderr, "seqpoint probe: %s\n", loaded.status().message().c_str());
      return 1;
    }
    std::printf("%d seqpoint BPF programs loaded\n", *loaded);
    return *loaded == 0 ? 0 : 1;
  }
  probes::ProbeToolOptions options;
  auto pid = args->GetInt("--pid");
  auto duration = args->GetDouble("--duration");
  auto max_sl = args->GetInt("--max-seq-len");
  for (const Status& s : {pid.status(), duration.status(), max_sl.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "seqpoint probe: %s\n", s.message().c_str());
      return 2;
    }
  }
  if (*pid && (**pid <= 0 || **pid > 0x7fffffff)) {
    std::fprintf(stderr, "seqpoint probe: --pid %lld is not a process id\n", **pid);
    return 2;
  }
  if (*max_sl && (**max_sl <= 0 || **max_sl > 0xffffffffLL)) {
    std::fprintf(stderr, "seqpoint probe: --max-seq-len must be in 1..4294967295\n");
    return 2;
  }
  options.pid = *pid ? static_cast<int>(**pid) : 0;
  options.all = args->Has("--all");
  options.wait = args->Has("--wait");
  options.duration_s = *duration ? **duration : 0;
  options.out = args->Get("--out").value_or("");
  if (*max_sl) options.max_seq_len = static_cast<uint32_t>(**max_sl);
  if (Status s = AddZeroCode(*args, &options); !s.ok()) {
    std::fprintf(stderr, "seqpoint probe: %s\n", s.message().c_str());
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  options.stop = [] { return g_stop != 0; };
  Status s = probes::RunProbeTool(options);
  if (!s.ok()) {
    std::fprintf(stderr, "seqpoint probe: %s\n", s.message().c_str());
    return s.code() == ErrorCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

#else  // !SEQPOINT_HAVE_EBPF

int RunProbeCommand(Args) {
  std::fprintf(stderr,
               "seqpoint probe: this build has no eBPF support (configured with "
               "SEQPOINT_WITH_EBPF=OFF, or libbpf-dev/bpftool/clang were missing)\n");
  return 1;
}

#endif

}  // namespace seqpoint::cli
