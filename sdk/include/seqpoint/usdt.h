/* SeqPoint iteration markers: USDT provider `seqpoint` (docs/usdt-abi.md).
 *
 *   SEQPOINT_ITERATION_BEGIN(iter, seq_len, batch, tokens);   // u64, u32, u32, u64
 *   ... one training iteration ...
 *   SEQPOINT_ITERATION_END(iter);                              // u64
 *
 * Each marker compiles to a single nop plus an ELF note (sys/sdt.h): it costs nothing unless
 * a tracer (seqpointd, `seqpoint probe`) attaches, and then one uprobe hit. Works from C and
 * C++. Link nothing; include this header and build with systemtap-sdt-dev installed.
 */
#ifndef SEQPOINT_USDT_H_
#define SEQPOINT_USDT_H_

#include <stdint.h>
#include <sys/sdt.h>

#define SEQPOINT_ITERATION_BEGIN(iter, seq_len, batch, tokens)                     \
  DTRACE_PROBE4(seqpoint, iteration_begin, (uint64_t)(iter), (uint32_t)(seq_len), \
                (uint32_t)(batch), (uint64_t)(tokens))

#define SEQPOINT_ITERATION_END(iter) DTRACE_PROBE1(seqpoint, iteration_end, (uint64_t)(iter))

#endif /* SEQPOINT_USDT_H_ */
