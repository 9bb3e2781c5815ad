#include "agent/cli/commands.h"
namespace seqpoint::cli {
int RunProjectCommand(Args) { return 1; }
}  // namespace seqpoint::cli
