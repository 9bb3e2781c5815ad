/* Layouts shared by iteration_probe.bpf.c (kernel side) and iteration_probes.cpp (user side).
 *
 * Fixed-width types only, no pointers, sizes pinned by static asserts: the BPF object and the
 * agent are built from this one header (the CMake rule lists it in DEPENDS), so the two sides
 * can never disagree on a layout. Plain C, included by C (BPF) and C++.
 */
#ifndef SEQPOINT_COLLECTORS_EBPF_ITERATION_PROBE_H_
#define SEQPOINT_COLLECTORS_EBPF_ITERATION_PROBE_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#ifdef __cplusplus
#define SP_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define SP_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* At most this many zero-code (uprobe) probe definitions per skeleton; the probe's index travels
 * as the uprobe's BPF cookie. */
#define SP_MAX_ZERO_CODE_PROBES 16

enum sp_event_kind {
  SP_EVENT_BEGIN = 1, /* iteration_begin of an iteration the agent asked hooks for */
  SP_EVENT_END = 2,   /* one whole iteration: begin and end timestamps */
};

enum sp_event_flag {
  SP_FLAG_SL_ZERO = 1u << 0,   /* seq_len was 0 */
  SP_FLAG_SL_HUGE = 1u << 1,   /* seq_len above the configured max_seq_len */
  SP_FLAG_ABANDONED = 1u << 2, /* the same thread began another iteration before this one ended */
  SP_FLAG_NO_BEGIN = 1u << 3,  /* an end whose begin was not seen (attached mid-iteration) */
  SP_FLAG_OVERLAP = 1u << 4,   /* another iteration of this process was open at begin */
  SP_FLAG_HOOKED = 1u << 5,    /* the agent asked for hooks on this iteration */
  SP_FLAG_ZERO_CODE = 1u << 6, /* from a zero-code uprobe, not the seqpoint USDT provider */
  SP_FLAG_DUPLICATE = 1u << 7, /* a second begin for an iteration index already open */
  SP_FLAG_EXITED = 1u << 8,    /* user side: the process exited (or was detached) mid-iteration */
};

/* Perf counters read by the probes themselves (probe_counters.h): at most this many events per
 * process, opened on each of its threads; the perf event array holds SP_MAX_COUNTERS entries per
 * thread slot. */
#define SP_MAX_COUNTERS 4
#define SP_MAX_COUNTER_THREADS 4096

enum sp_counter_flag {
  SP_COUNTERS_OTHERS_RUNNING = 1u << 0, /* another counted thread of the process was on a CPU at
                                           begin or end: its run since its last switch-in is
                                           missing from the deltas */
  SP_COUNTERS_UNCOUNTED_THREAD = 1u << 1, /* a thread with no events yet (created since the
                                             last registration) ran inside the window */
  SP_COUNTERS_READ_FAILED = 1u << 2,      /* a read failed (bpf_perf_event_read_value) */
};

/* One ring-buffer record. Timestamps are bpf_ktime_get_ns(), i.e. CLOCK_MONOTONIC. */
struct sp_event {
  __u64 iter;
  __u64 tokens;
  __u64 begin_ns;
  __u64 end_ns; /* 0 in SP_EVENT_BEGIN */
  __u32 pid;    /* tgid */
  __u32 tid;    /* thread that fired the probe */
  __u32 seq_len;
  __u32 batch;
  __u32 kind;  /* enum sp_event_kind */
  __u32 flags; /* enum sp_event_flag */
  __u32 probe; /* 0: USDT; 1 + index of the zero-code probe */
  __u32 pad;
  /* SP_EVENT_END of a hooked iteration of a process with counters: the process's counts from
   * begin to end, summed over its threads (probe_counters.h); bit i of counter_mask says
   * counters[i] holds one. */
  __u64 counters[SP_MAX_COUNTERS];
  __u32 counter_mask;
  __u32 counter_flags; /* enum sp_counter_flag */
};
SP_STATIC_ASSERT(sizeof(struct sp_event) == 104, "sp_event layout");

/* Open iterations, keyed by process and iteration index (two threads may overlap). */
struct sp_inflight_key {
  __u32 pid;
  __u32 pad;
  __u64 iter;
};
SP_STATIC_ASSERT(sizeof(struct sp_inflight_key) == 16, "sp_inflight_key layout");

struct sp_inflight {
  __u64 tokens;
  __u64 begin_ns;
  __u32 seq_len;
  __u32 batch;
  __u32 tid;
  __u32 flags;
};
SP_STATIC_ASSERT(sizeof(struct sp_inflight) == 32, "sp_inflight layout");

/* The iteration a thread has open, to tell "begin without end" from a second thread's overlap. */
struct sp_thread_open {
  __u64 iter;
  __u32 pid;
  __u32 pad;
};
SP_STATIC_ASSERT(sizeof(struct sp_thread_open) == 16, "sp_thread_open layout");

enum sp_hook_mode {
  SP_HOOK_NONE = 0,   /* no begin events; end events are batched */
  SP_HOOK_WANTED = 1, /* begin events, woken at once, for wanted iterations and SLs only */
  SP_HOOK_ALL = 2,    /* a begin event, woken at once, for every iteration */
};

/* Per attached process, written by the probes (the user side only creates and deletes it). */
struct sp_pid_state {
  __u32 open; /* iterations open now (overlap detection) */
  __u32 pad;
  __u64 events; /* records submitted to the ring buffer */
  __u64 lost;   /* records dropped because the ring buffer was full */
  __u64 hits;   /* probe hits */
};
SP_STATIC_ASSERT(sizeof(struct sp_pid_state) == 32, "sp_pid_state layout");

struct sp_wanted_iter_key {
  __u32 pid;
  __u32 pad;
  __u64 iter;
};
SP_STATIC_ASSERT(sizeof(struct sp_wanted_iter_key) == 16, "sp_wanted_iter_key layout");

/* Value: how many more iterations with this SL the agent wants hooks for (decremented).
 * seq_len SP_ANY_SEQ_LEN (0, never a valid SL) stands for every SL of the pid: the agent wants
 * begin hooks from a process's first iteration on, before it has seen any of its SLs. */
#define SP_ANY_SEQ_LEN 0u
struct sp_wanted_sl_key {
  __u32 pid;
  __u32 seq_len;
};
SP_STATIC_ASSERT(sizeof(struct sp_wanted_sl_key) == 8, "sp_wanted_sl_key layout");

enum sp_sl_reduce {
  SP_REDUCE_FIRST = 0, /* the SL argument of the first call in the iteration */
  SP_REDUCE_MAX = 1,   /* the largest over the iteration's calls (GEMM token dimension) */
  SP_REDUCE_LAST = 2,
};

/* A zero-code probe: which argument of the SL function carries the SL, and how to read it. */
struct sp_zero_code_config {
  __u32 arg_index; /* 0-based; 0..5 in registers, 6.. on the stack (x86-64 SysV) */
  __u32 arg_bytes; /* 4 or 8 */
  __u32 deref;     /* 1: the argument points at the value (Fortran BLAS, int*) */
  __u32 reduce;    /* enum sp_sl_reduce */
};
SP_STATIC_ASSERT(sizeof(struct sp_zero_code_config) == 16, "sp_zero_code_config layout");

struct sp_zero_code_key {
  __u32 pid;
  __u32 probe;
};
SP_STATIC_ASSERT(sizeof(struct sp_zero_code_key) == 8, "sp_zero_code_key layout");

/* The iteration a zero-code probe is assembling between two boundary calls. */
struct sp_zero_code_state {
  __u64 iter;
  __u64 begin_ns; /* previous boundary, or the first SL call after attach */
  __u64 calls;    /* SL calls seen in this iteration */
  __u32 seq_len;
  __u32 flags;
};
SP_STATIC_ASSERT(sizeof(struct sp_zero_code_state) == 32, "sp_zero_code_state layout");

/* Cookie of a zero-code uprobe: probe index in the low bits, role in bit 8. */
#define SP_COOKIE_ROLE_BOUNDARY (1u << 8)
#define SP_COOKIE_PROBE_MASK 0xffu

/* A thread whose perf events sit in the perf event array at slot * SP_MAX_COUNTERS + i. */
struct sp_counter_thread {
  __u32 pid;
  __u32 slot;
  __u32 on_cpu; /* between its switch-in and switch-out, as seen by sp_sched_switch */
  __u32 pad;
  __u64 last[SP_MAX_COUNTERS]; /* its counts when last banked into the process */
};
SP_STATIC_ASSERT(sizeof(struct sp_counter_thread) == 48, "sp_counter_thread layout");

/* A process with counters: the sum of its threads' counts up to each one's last bank. */
struct sp_counter_proc {
  __u32 count;   /* events per thread (<= SP_MAX_COUNTERS); set by the user side */
  __u32 running; /* its counted threads on a CPU now */
  __u64 banked[SP_MAX_COUNTERS];
  __u64 uncounted_runs; /* switch-outs of its threads that have no events (new threads) */
  __u64 read_errors;
};
SP_STATIC_ASSERT(sizeof(struct sp_counter_proc) == 56, "sp_counter_proc layout");

/* The process's totals at the begin of a hooked iteration, keyed like `inflight`. */
struct sp_counter_begin {
  __u64 values[SP_MAX_COUNTERS];
  __u64 uncounted_runs;
  __u32 flags; /* enum sp_counter_flag seen at begin */
  __u32 pad;
};
SP_STATIC_ASSERT(sizeof(struct sp_counter_begin) == 48, "sp_counter_begin layout");

/* Global counters (per-CPU array; the user side sums the CPUs). */
enum sp_stat {
  SP_STAT_HITS = 0,       /* probe hits of any kind */
  SP_STAT_EVENTS,         /* records submitted */
  SP_STAT_LOST,           /* records dropped: ring buffer full */
  SP_STAT_SL_ZERO,        /* iterations with seq_len 0 */
  SP_STAT_SL_HUGE,        /* iterations with seq_len > max_seq_len */
  SP_STAT_ABANDONED,      /* begins with no end before the thread's next begin */
  SP_STAT_NO_BEGIN,       /* ends with no recorded begin */
  SP_STAT_OVERLAP,        /* begins while another iteration of the process was open */
  SP_STAT_DUPLICATE,      /* begins for an iteration index already open */
  SP_STAT_INFLIGHT_FULL,  /* begins not recorded: the open-iteration table was full */
  SP_STAT_ARG_FAULT,      /* zero-code SL argument could not be read */
  SP_STAT_EMPTY_BOUNDARY, /* zero-code boundary with no SL call since the last one */
  SP_STAT_WAKEUPS,        /* records submitted with an immediate wakeup */
  SP_STAT_COUNTER_WINDOWS, /* hooked iterations whose counters were read at both probes */
  SP_STAT_COUNTER_READ_FAIL, /* failed bpf_perf_event_read_value calls */
  SP_STAT_COUNT,
};

#endif /* SEQPOINT_COLLECTORS_EBPF_ITERATION_PROBE_H_ */
