#include "common/trace_csv.h"
// placeholder: being written
