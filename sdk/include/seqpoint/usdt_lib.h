/* libseqpoint_usdt.so: the seqpoint USDT sites (usdt.h) behind plain C functions, for
 * languages that cannot expand a C macro (Python through ctypes: sdk/python/seqpoint_probe).
 * Each call costs one function call plus a nop; one uprobe hit when a tracer is attached. */
#ifndef SEQPOINT_USDT_LIB_H_
#define SEQPOINT_USDT_LIB_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version of this library; the Python module refuses a library it does not know. */
#define SEQPOINT_USDT_ABI_VERSION 1
int seqpoint_usdt_abi_version(void);

/* Fires seqpoint:iteration_begin(iter, seq_len, batch, tokens). */
void seqpoint_iteration_begin(uint64_t iter, uint32_t seq_len, uint32_t batch, uint64_t tokens);

/* Fires seqpoint:iteration_end(iter). */
void seqpoint_iteration_end(uint64_t iter);

#ifdef __cplusplus
}
#endif

#endif /* SEQPOINT_USDT_LIB_H_ */
