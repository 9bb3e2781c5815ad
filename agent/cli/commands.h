// Every `seqpoint` subcommand: int Run<Name>Command(args) where args excludes the program
// and subcommand names. Each returns the process exit status (0 ok, 1 failure, 2 usage error)
// and prints its own errors to stderr.
#pragma once

#include <span>
#include <string_view>

namespace seqpoint::cli {

using Args = std::span<const char* const>;

int RunSelectCommand(Args args);
int RunProjectCommand(Args args);
int RunEvaluateCommand(Args args);
int RunGpuCommand(Args args);
int RunProbeCommand(Args args);
// Talk to the local seqpointd (agent/cli/control_commands.cpp).
int RunStatusCommand(Args args);
int RunPauseCommand(Args args);
int RunResumeCommand(Args args);
int RunRunsCommand(Args args);
int RunShowCommand(Args args);
int RunReportCommand(Args args);

}  // namespace seqpoint::cli
