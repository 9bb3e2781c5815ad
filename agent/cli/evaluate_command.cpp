#include "agent/cli/commands.h"
namespace seqpoint::cli {
int RunEvaluateCommand(Args) { return 1; }
}  // namespace seqpoint::cli
