/* Layouts shared by collective_probe.bpf.c (kernel side) and collective_probes.cpp (user side).
 *
 * One record per entry of a collective (an all-reduce, reduce-scatter, all-gather, a group's
 * end) in an attached process: when its thread arrived there. Fixed-width types only, no
 * pointers, sizes pinned by static asserts; the CMake rule lists this header in DEPENDS.
 * Plain C, included by C (BPF) and C++.
 */
#ifndef SEQPOINT_PROBES_COLLECTIVE_PROBE_H_
#define SEQPOINT_PROBES_COLLECTIVE_PROBE_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#ifdef __cplusplus
#define SP_COLL_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define SP_COLL_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

struct sp_collective_event {
  __u32 pid;      /* tgid: the rank's process */
  __u32 tid;      /* the thread that entered the collective */
  __u64 ts_ns;    /* bpf_ktime_get_ns(): CLOCK_MONOTONIC, as the iteration probes stamp */
  __u32 function; /* the uprobe's BPF cookie: index into the user side's function table */
  __u32 pad;
};
SP_COLL_STATIC_ASSERT(sizeof(struct sp_collective_event) == 24, "sp_collective_event layout");

enum sp_collective_stat {
  SP_COLL_STAT_HITS = 0,    /* uprobe hits */
  SP_COLL_STAT_LOST = 1,    /* records the ring buffer had no room for */
  SP_COLL_STAT_WAKEUPS = 2, /* forced consumer wakeups */
  SP_COLL_STAT_COUNT = 3,
};

#endif /* SEQPOINT_PROBES_COLLECTIVE_PROBE_H_ */
