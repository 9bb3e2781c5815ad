#include "agent/cli/commands.h"
namespace seqpoint::cli {
int RunSelectCommand(Args) { return 1; }
}  // namespace seqpoint::cli
