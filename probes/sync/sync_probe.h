/* Layout shared by sync_probe.bpf.c and sync_probe.cpp: the latest return from a CUDA
 * synchronisation (cudaStreamSynchronize, cuCtxSynchronize, a device-to-host cudaMemcpy, ...)
 * of each watched process. Fixed-width fields only: both compilers see the same layout. */
#ifndef SEQPOINT_PROBES_SYNC_PROBE_H_
#define SEQPOINT_PROBES_SYNC_PROBE_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define SP_SYNC_MAX_PIDS 4096
#define SP_SYNC_MAX_THREADS 65536

/* The uprobe cookie: the sync function's index, and for copies whose direction is an argument
 * (cudaMemcpy(dst, src, count, kind)) the flag below: only kind == cudaMemcpyDeviceToHost (2)
 * is a sync; the entry program notes it per thread, the return program checks. */
#define SP_SYNC_COOKIE_D2H_ONLY 0x80000000u
#define SP_SYNC_COOKIE_INDEX_MASK 0x0000ffffu
#define SP_SYNC_MEMCPY_D2H 2

/* The value of sync_marks[tgid]. */
struct sp_sync_mark {
  __u64 last_ns;    /* CLOCK_MONOTONIC (bpf_ktime_get_ns) of the latest sync return */
  __u64 count;      /* sync returns since the process was watched */
  __u32 function;   /* index of that sync function (the uprobe's cookie) */
  __u32 pad;
};

#endif /* SEQPOINT_PROBES_SYNC_PROBE_H_ */
