/* See seqpoint/usdt_lib.h. The USDT sites live here, in this shared library: a tracer attaches
 * to them in /proc/PID/root/<path of this .so>, found in the process's maps. */
#include "seqpoint/usdt_lib.h"

#include "seqpoint/usdt.h"

#define SEQPOINT_EXPORT __attribute__((visibility("default")))

SEQPOINT_EXPORT int seqpoint_usdt_abi_version(void) { return SEQPOINT_USDT_ABI_VERSION; }

SEQPOINT_EXPORT void seqpoint_iteration_begin(uint64_t iter, uint32_t seq_len, uint32_t batch,
                                              uint64_t tokens) {
  SEQPOINT_ITERATION_BEGIN(iter, seq_len, batch, tokens);
}

SEQPOINT_EXPORT void seqpoint_iteration_end(uint64_t iter) { SEQPOINT_ITERATION_END(iter); }
