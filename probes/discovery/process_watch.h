/* Layouts shared by process_watch.bpf.c and process_discovery.cpp: process lifecycle events
 * that drive discovery (exec, library loads) and detach (exit). Fixed-width types only. */
#ifndef SEQPOINT_COLLECTORS_EBPF_PROCESS_WATCH_H_
#define SEQPOINT_COLLECTORS_EBPF_PROCESS_WATCH_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#ifdef __cplusplus
#define SP_PW_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define SP_PW_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

enum sp_proc_event_kind {
  SP_PROC_EXEC = 1,         /* a process replaced its image: examine it */
  SP_PROC_EXIT = 2,         /* the last thread of a watched process exited */
  SP_PROC_LIBS_CHANGED = 3, /* the dynamic linker changed the link map (dlopen, dlclose) */
};

/* exit_status (SP_PROC_EXIT only) is the wait status the parent's wait4() gets: bits 0-6 the
 * fatal signal (0: exited), bit 7 core dumped, bits 8-15 the exit code (WIFEXITED etc. of
 * <sys/wait.h> decode it). */
struct sp_proc_event {
  __u32 pid;  /* tgid */
  __u32 kind; /* enum sp_proc_event_kind */
  __u64 time_ns;
  char comm[16];
  __u32 exit_status;
  __u32 reserved; /* 0 */
};
SP_PW_STATIC_ASSERT(sizeof(struct sp_proc_event) == 40, "sp_proc_event layout");

/* The exit of a watched process as the kernel saw it, kept in the `exits` map (tgid -> this)
 * until the user side takes it: a ring buffer full at that moment drops the exit event, never
 * this record, so the user side still knows when (time_ns, CLOCK_MONOTONIC, the same clock as
 * the event's) and how (exit_status, as in sp_proc_event) each process ended, and in which
 * order processes found gone together really ended. */
struct sp_proc_exit {
  __u64 time_ns;
  __u32 exit_status;
  __u32 reserved; /* 0 */
};
SP_PW_STATIC_ASSERT(sizeof(struct sp_proc_exit) == 16, "sp_proc_exit layout");

enum sp_proc_stat {
  SP_PROC_STAT_EVENTS = 0,
  SP_PROC_STAT_LOST, /* ring buffer full: the user side falls back to a /proc rescan */
  SP_PROC_STAT_EXIT_UNRECORDED, /* exits map full: an exit whose event may be lost too */
  SP_PROC_STAT_COUNT,
};

#endif /* SEQPOINT_COLLECTORS_EBPF_PROCESS_WATCH_H_ */
