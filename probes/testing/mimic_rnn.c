/* A shared library that mimics the shape of the APIs the zero-code presets probe, so the
 * tests drive real uprobes on a real process without a GPU library:
 *   mimicRNNForwardTraining(handle, desc, int sequenceLen, x, y)  like miopenRNNForwardTraining
 *   mimicRNNBackwardWeights(handle, desc, int sequenceLen)        like miopenRNNBackwardWeights
 *   mimic_sgemm_(char*, char*, int* m, int* n, int* k)            like Fortran BLAS sgemm_
 *   mimicWideCall(a0 .. a6, long sl)                              SL in a stack argument (arg 7)
 *   mimicOptimizerStep(void)                                      the iteration boundary
 * The bodies touch a volatile so calls are neither elided nor merged. */
#include <stdint.h>

#ifndef EXPORT /* the "nosym" build defines it without default visibility */
#define EXPORT __attribute__((visibility("default"), noinline))
#endif

static volatile uint64_t g_sink;

EXPORT int mimicRNNForwardTraining(void* handle, void* desc, int sequenceLen, const void* x,
                                   void* y) {
  g_sink += (uint64_t)(uintptr_t)handle + (uint64_t)(uintptr_t)desc + (uint64_t)sequenceLen +
            (uint64_t)(uintptr_t)x + (uint64_t)(uintptr_t)y;
  return 0;
}

EXPORT int mimicRNNBackwardWeights(void* handle, void* desc, int sequenceLen) {
  g_sink += (uint64_t)(uintptr_t)handle + (uint64_t)(uintptr_t)desc + (uint64_t)sequenceLen;
  return 0;
}

EXPORT void mimic_sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                         const int* k) {
  g_sink += (uint64_t)(*transa + *transb + *m + *n + *k);
}

EXPORT long mimicWideCall(long a0, long a1, long a2, long a3, long a4, long a5, long a6, long sl) {
  g_sink += (uint64_t)(a0 + a1 + a2 + a3 + a4 + a5 + a6 + sl);
  return sl;
}

EXPORT void mimicOptimizerStep(void) { g_sink += 1; }
