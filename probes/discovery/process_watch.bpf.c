// SPDX-License-Identifier: GPL-2.0
/* Process lifecycle for discovery (process_discovery.h): exec of any process, exit of the
 * processes the agent watches, and link-map changes reported by the dynamic linker.
 *
 * - tp_btf (BTF-typed raw tracepoints) need no tracefs mount, unlike classic tracepoints.
 * - sched_process_exit fires for every thread; the process is gone when signal->live has
 *   dropped to 0, which do_exit() (kernel/exit.c) decrements before the tracepoint fires.
 *   The exit event carries the wait status the parent will reap (exit_status_of below).
 * - glibc's ld.so calls the empty function _dl_debug_state() after every change of the link
 *   map (the r_brk protocol debuggers use, <link.h>); a uprobe on it tells us when a process
 *   has loaded a library (e.g. libseqpoint_usdt.so from Python, or a configured BLAS), so the
 *   user side rescans that process's maps only then, never by polling.
 * Exec and library events are rare (per process start, per dlopen); exits are filtered here
 * to watched processes so a busy node does not flood the ring buffer.
 */
/* vmlinux.h must come first: the libbpf headers build on its types. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
// clang-format on

#include "process_watch.h"

char LICENSE[] SEC("license") = "GPL";

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} proc_events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32); /* tgid */
  __type(value, __u8);
} watched SEC(".maps");

/* Exits of watched processes not taken by the user side yet (process_watch.h: sp_proc_exit).
 * At most one per watched pid, taken when its event is read or its process found gone. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32); /* tgid */
  __type(value, struct sp_proc_exit);
} exits SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, SP_PROC_STAT_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} proc_stats SEC(".maps");

static __always_inline void count(__u32 stat) {
  __u64* v = bpf_map_lookup_elem(&proc_stats, &stat);
  if (v) *v += 1;
}

/* Exec wakes the consumer when it has caught up (flags 0); library loads come in bursts and
 * wait for its next poll (no wake-up). An exit of a watched process always wakes it
 * (BPF_RB_FORCE_WAKEUP): with flags 0 it did only when the ring was empty, and any process's
 * library load left a record there that woke nobody, so a busy node (an exec storm: each
 * process start loads libraries) read a training process's exit up to probes.poll_interval_ms
 * late. Only watched processes get here (sp_exit), so the node's other exits add no wake-up. */
static __always_inline void emit(__u32 pid, __u32 kind, __u32 exit_status, __u64 time_ns) {
  struct sp_proc_event* e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);
  if (!e) {
    count(SP_PROC_STAT_LOST);
    return;
  }
  e->pid = pid;
  e->kind = kind;
  e->time_ns = time_ns;
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  e->exit_status = exit_status;
  e->reserved = 0;
  bpf_ringbuf_submit(e, kind == SP_PROC_LIBS_CHANGED ? BPF_RB_NO_WAKEUP
                       : kind == SP_PROC_EXIT        ? BPF_RB_FORCE_WAKEUP
                                                     : 0);
  count(SP_PROC_STAT_EVENTS);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sp_exec, struct task_struct* p) {
  emit(BPF_CORE_READ(p, tgid), SP_PROC_EXEC, 0, bpf_ktime_get_ns());
  return 0;
}

/* include/linux/sched/signal.h: a #define, so not in BTF; 0x4 in every kernel with BTF. */
#define SP_SIGNAL_GROUP_EXIT 0x00000004

/* The wait status the parent's wait4() will get for the process whose last thread `p` is:
 * exactly what wait_task_zombie() (kernel/exit.c) reports,
 *   status = (p->signal->flags & SIGNAL_GROUP_EXIT) ? p->signal->group_exit_code
 *                                                   : p->exit_code;   (p = the group leader)
 * - exit_group(n) and fatal signals go through do_group_exit() (kernel/exit.c), which sets
 *   SIGNAL_GROUP_EXIT and group_exit_code = (n & 0xff) << 8, or the signal number; a signal's
 *   core dump ORs 0x80 into group_exit_code (coredump_finish(), fs/coredump.c) before the
 *   other threads finish exiting, so the last thread, here, sees the final value.
 * - Since Linux 6.0 synchronize_group_exit() also sets them when the last thread calls plain
 *   exit(); before that, such a group reports the leader's exit_code, set by do_exit() before
 *   this tracepoint (the leader, if it exited earlier, stays a zombie until reaped). */
static __always_inline __u32 exit_status_of(struct task_struct* p) {
  if (BPF_CORE_READ(p, signal, flags) & SP_SIGNAL_GROUP_EXIT) {
    return (__u32)BPF_CORE_READ(p, signal, group_exit_code);
  }
  return (__u32)BPF_CORE_READ(p, group_leader, exit_code);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sp_exit, struct task_struct* p) {
  if (BPF_CORE_READ(p, signal, live.counter) != 0) return 0; /* other threads live on */
  __u32 pid = BPF_CORE_READ(p, tgid);
  if (bpf_map_delete_elem(&watched, &pid) != 0) return 0; /* not a process we watch */
  /* Recorded before the event: the event may find the ring full, the record cannot be lost
   * that way (the map holds as many entries as `watched`). */
  struct sp_proc_exit x = {.time_ns = bpf_ktime_get_ns(), .exit_status = exit_status_of(p)};
  if (bpf_map_update_elem(&exits, &pid, &x, BPF_ANY) != 0) count(SP_PROC_STAT_EXIT_UNRECORDED);
  emit(pid, SP_PROC_EXIT, x.exit_status, x.time_ns);
  return 0;
}

SEC("uprobe")
int sp_dl_state(struct pt_regs* ctx) {
  emit(bpf_get_current_pid_tgid() >> 32, SP_PROC_LIBS_CHANGED, 0, bpf_ktime_get_ns());
  return 0;
}
