// `seqpoint`: the user CLI. One explicit command table; each command lives in its own file.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "agent/cli/commands.h"
#include "seqpoint/features.h"

namespace {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(seqpoint::cli::Args);
};

constexpr Command kCommands[] = {
    {"select", "choose SeqPoints from an iteration trace", seqpoint::cli::RunSelectCommand},
    {"project", "project whole-run totals from the SeqPoints' measurements",
     seqpoint::cli::RunProjectCommand},
    {"evaluate", "select + project on a fully measured trace, against baselines",
     seqpoint::cli::RunEvaluateCommand},
    {"probe", "attach the iteration probes to processes and write their traces",
     seqpoint::cli::RunProbeCommand},
    {"gpu", "print each GPU's decoded firmware telemetry", seqpoint::cli::RunGpuCommand},
    {"status", "the local seqpointd: probes, runs, collectors, upload",
     seqpoint::cli::RunStatusCommand},
    {"runs", "runs watched by the local seqpointd", seqpoint::cli::RunRunsCommand},
    {"show", "a run's SL histogram, SeqPoints and projections with intervals",
     seqpoint::cli::RunShowCommand},
    {"report", "show, plus measurements and the SL-bin cost history", seqpoint::cli::RunReportCommand},
    {"pause", "stop the local seqpointd's collectors (site tooling needs the counters)",
     seqpoint::cli::RunPauseCommand},
    {"resume", "start the collectors again after a pause", seqpoint::cli::RunResumeCommand},
};

void PrintUsage(std::FILE* out) {
  std::fprintf(out,
               "usage: seqpoint COMMAND [ARGS...]\n"
               "SeqPoint %s: representative-iteration profiling of sequence-model training.\n\n"
               "commands:\n",
               SEQPOINT_VERSION);
  for (const Command& c : kCommands) {
    std::fprintf(out, "  %-10.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
  }
  std::fprintf(out, "\n'seqpoint COMMAND --help' describes a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  std::string_view name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    PrintUsage(stdout);
    return 0;
  }
  if (name == "--version") {
    std::printf("seqpoint %s\n", SEQPOINT_VERSION);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (c.name == name) {
      return c.run(seqpoint::cli::Args(argv + 2, static_cast<size_t>(argc - 2)));
    }
  }
  std::fprintf(stderr, "seqpoint: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}
