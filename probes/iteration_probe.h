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

/* Software counters read by the probes themselves (probe_counters.h): at most this many per
 * process. They are kept by the scheduler hook per process over all its threads (no per-thread
 * perf events), so any number of threads is counted; SP_MAX_COUNTER_THREADS bounds the threads
 * of counted processes tracked at once. */
#define SP_MAX_COUNTERS 4
#define SP_MAX_COUNTER_THREADS 65536

/* What a probe counter counts (sp_counter_proc.kinds[i]); each matches the perf software event
 * of the same name, summed over the process's threads. */
enum sp_counter_kind {
  SP_KIND_ON_CPU_NS = 1,   /* task-clock, cpu-clock: time on a CPU (se.sum_exec_runtime) */
  SP_KIND_SWITCHES = 2,    /* context-switches: switch-outs */
  SP_KIND_MIGRATIONS = 3,  /* cpu-migrations: se.nr_migrations */
  SP_KIND_FAULTS = 4,      /* page-faults: min_flt + maj_flt */
  SP_KIND_MIN_FAULTS = 5,  /* minor-faults */
  SP_KIND_MAJ_FAULTS = 6,  /* major-faults */
};

/* Why a counter of an iteration is missing (its bit in counter_mask is clear): set in
 * counter_flags; a value the probes cannot stand behind is never sent. */
enum sp_counter_flag {
  SP_COUNTERS_OTHERS_RUNNING = 1u << 0, /* another thread was on a CPU at begin or end: its page
                                           faults since its switch-in cannot be read (fault
                                           kinds only; time, switches, migrations stay exact) */
  SP_COUNTERS_UNCOUNTED_THREAD = 1u << 1, /* a thread ran inside the window whose switch-in the
                                             hook did not see (the thread table was full, or the
                                             probing thread itself was never seen) */
  SP_COUNTERS_READ_FAILED = 1u << 2,      /* no consistent snapshot: the process's threads kept
                                             switching while the probe read them */
  SP_COUNTERS_IMPLAUSIBLE = 1u << 3,      /* a value no process could produce (more CPU time than
                                             wall time x usable CPUs, or a count going back) */
  SP_COUNTERS_EXEC = 1u << 4,             /* the process called exec inside the window */
  SP_COUNTERS_STOLEN = 1u << 5,           /* time the hypervisor stole from the process's threads
                                             at a probe was large (> 1/200 of the window's CPU
                                             time): it is subtracted (steal_ns), but the steal of
                                             a CPU's last tick is not yet visible, so task-clock
                                             is left out (time kinds only) */
};

/* The steal correction looks at CPUs 0..SP_MAX_CPUS-1 (the cpu_runs map); a thread on a CPU
 * beyond them is counted by wall time, as before. */
#define SP_MAX_CPUS 1024

/* How a snapshot read the steal time of the CPUs its process's threads were on. */
enum sp_steal_how {
  SP_STEAL_STALE = 1u << 0,     /* some CPU's steal as of its last tick or switch (the run
                                   queue's copy): the steal of the last tick is not seen yet */
  SP_STEAL_PREEMPTED = 1u << 1, /* a CPU running a thread of the process was preempted by the
                                   hypervisor at the probe: its steal since is not published */
};

/* The plausibility guard, shared by the probes and the user side (and its tests): whether a
 * counter delta from `begin` to `end` of kind `kind`, over `wall_ns` of wall time in a process
 * whose threads may use `cpus` CPUs, is one a process could produce. Counts never go back; time
 * on a CPU never exceeds wall time x CPUs (1 us per CPU of slack: the two snapshots' clock reads
 * are not the switch hook's). */
static inline int sp_counter_plausible(__u64 begin, __u64 end, __u32 kind, __u64 wall_ns,
                                       __u32 cpus) {
  if (end < begin) return 0;
  if (kind == SP_KIND_ON_CPU_NS) {
    __u64 n = cpus == 0 ? 1 : cpus;
    if (end - begin > (wall_ns + 1000) * n) return 0;
  }
  return 1;
}

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
  __u32 cpus;  /* SP_EVENT_END with counters: CPUs the ending thread may run on */
  /* SP_EVENT_END of a hooked iteration of a process with counters: the process's counts from
   * begin to end, summed over its threads (probe_counters.h); bit i of counter_mask says
   * counters[i] holds one, counter_flags why one is missing. */
  __u64 counters[SP_MAX_COUNTERS];
  __u32 counter_mask;
  __u32 counter_flags; /* enum sp_counter_flag */
  /* Time the hypervisor stole from the process's threads while they were on a CPU across the
   * probes, subtracted from time on a CPU (|end's - begin's|; 0 on bare metal). */
  __u64 steal_ns;
};
SP_STATIC_ASSERT(sizeof(struct sp_event) == 112, "sp_event layout");

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
  /* Gated probes (probes/zero_code_probe.h): the SL function only records the thread's latest
   * SL (zero_code_pending); a call of the gate function whose argument gate_arg equals
   * gate_value is the iteration's SL call. */
  __u32 gated;
  __u32 gate_arg;
  __u64 gate_value;
  /* enum sp_zero_code_window: where an iteration begins (ZeroCodeWindow). Not pinned: a
   * restarted daemon writes the table afresh. */
  __u32 window;
  __u32 pad;
};
SP_STATIC_ASSERT(sizeof(struct sp_zero_code_config) == 40, "sp_zero_code_config layout");

enum sp_zero_code_window {
  SP_WINDOW_CALLS = 0, /* after the last boundary call of the previous burst */
  SP_WINDOW_STEP = 1,  /* at the boundary call that ended the previous iteration: tiled */
};

/* The SL a gated probe's SL function last saw in one thread. */
struct sp_zero_code_thread_key {
  __u32 pid;
  __u32 tid;
  __u32 probe;
  __u32 pad;
};
SP_STATIC_ASSERT(sizeof(struct sp_zero_code_thread_key) == 16, "sp_zero_code_thread_key layout");

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
#define SP_COOKIE_ROLE_GATE (1u << 9)
#define SP_COOKIE_PROBE_MASK 0xffu

/* A thread of a counted process, as the scheduler hook last saw it (counter_threads, keyed by
 * the thread's task_struct address, not its tid: an exec from a thread other than the leader
 * swaps the tids of the exec'ing thread and the dying leader (fs/exec.c de_thread,
 * exchange_tids) long before the exec tracepoint fires, and either may switch out or in under
 * its new tid meanwhile; a task's address stays its own until it is freed). Written only by the
 * hook on the thread's own CPU, and once by the seeding iterator when the process is armed. */
enum sp_thread_state {
  SP_THREAD_OFF = 0, /* off a CPU; its counts up to its last switch-out are banked */
  SP_THREAD_ON = 1,  /* on a CPU since in_ns */
};
struct sp_counter_thread {
  __u32 pid;
  __u32 state;      /* enum sp_thread_state */
  __u64 in_ns;      /* switch-in time (SP_THREAD_ON) */
  __u64 runtime_in; /* its se.sum_exec_runtime at switch-in (ON) or when last banked (OFF);
                       0: seeded on a CPU, not known */
  __u64 min_flt;    /* its fault counts at switch-in (ON) or when last banked (OFF) */
  __u64 maj_flt;
  __u64 migrations; /* its se.nr_migrations when last banked */
  __u64 steal_in;   /* its CPU's steal time at switch-in (rq->prev_steal_time_rq; 0: none) */
};
SP_STATIC_ASSERT(sizeof(struct sp_counter_thread) == 56, "sp_counter_thread layout");

/* Which counted thread is on a CPU (cpu_runs[cpu]), written by the hook on that CPU: the probes
 * look up the threads of a process that are on a CPU at a probe, and read each CPU's steal time
 * through `rq`. tgid 0: none. */
struct sp_cpu_run {
  __u32 tgid;
  __u32 pad;
  __u64 task; /* the thread's task_struct address: its counter_threads key */
  __u64 rq;   /* the CPU's struct rq, a kernel address read with bpf_probe_read_kernel */
};
SP_STATIC_ASSERT(sizeof(struct sp_cpu_run) == 24, "sp_cpu_run layout");

/* The values the probes snapshot for a process: each counter kind is one of these. */
struct sp_counter_totals {
  __u64 on_cpu_ns;
  __u64 switches;
  __u64 migrations;
  __u64 min_flt;
  __u64 maj_flt;
};
SP_STATIC_ASSERT(sizeof(struct sp_counter_totals) == 40, "sp_counter_totals layout");

/* A counted process. The hook banks each thread's run into it at switch-out; the time of its
 * threads on a CPU now is running x now - in_sum. Writers on several CPUs at once: every field
 * below `busy` changes only between busy += 1 and gen += 1, busy -= 1, so a reader that sees
 * busy == 0 and the same gen before and after its reads has a consistent snapshot. */
struct sp_counter_proc {
  __u32 count;    /* counters (<= SP_MAX_COUNTERS); set by the user side */
  __u32 kinds[SP_MAX_COUNTERS]; /* enum sp_counter_kind of each; set by the user side */
  __u32 busy;     /* writers inside an update now */
  __u64 gen;      /* completed updates */
  __u64 running;  /* threads SP_THREAD_ON */
  __u64 in_sum;   /* sum of their in_ns */
  struct sp_counter_totals banked;
  __u64 unknown_runs; /* runs the hook could not bank: they flag the windows they fall in */
  __u64 untracked;    /* threads with no record: the thread table was full */
  __u64 execs;        /* exec calls */
  __u64 snapshot_retries; /* snapshots retried because the hook was writing */
  __u64 unseen_runs;  /* runs whose switch-in the tracepoint never reported, banked exactly at
                         their switch-out from the scheduler's runtime (not flagged: a probe
                         inside one sees it on its CPU and flags its windows) */
};
SP_STATIC_ASSERT(sizeof(struct sp_counter_proc) == 128, "sp_counter_proc layout");

/* The process's snapshot at the begin of a hooked iteration, keyed like `inflight`. */
struct sp_counter_begin {
  struct sp_counter_totals values;
  __u64 now_ns;       /* the snapshot's time */
  __u64 unknown_runs; /* the proc's, at begin */
  __u64 untracked;
  __u64 execs;
  __u64 steal_ns; /* steal subtracted from values.on_cpu_ns at begin */
  __u32 flags; /* enum sp_counter_flag seen at begin */
  __u32 steal_how; /* enum sp_steal_how of the begin snapshot */
};
SP_STATIC_ASSERT(sizeof(struct sp_counter_begin) == 88, "sp_counter_begin layout");

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
  SP_STAT_COUNTER_READ_FAIL, /* counter snapshots given up: no consistent read */
  SP_STAT_COUNTER_IMPLAUSIBLE, /* counter values rejected by sp_counter_plausible */
  SP_STAT_COUNTER_FLAGGED,   /* counter windows sent with a counter left out (counter_flags) */
  SP_STAT_GATE_NO_SL,     /* zero-code gate passed with no SL recorded in its thread */
  SP_STAT_COUNTER_STEAL,  /* counter windows whose time on a CPU had stolen time subtracted */
  SP_STAT_COUNTER_STOLEN, /* of them, left out: too much stolen (SP_COUNTERS_STOLEN) */
  SP_STAT_COUNTER_STEAL_STALE, /* counter windows with a CPU's steal read from its run queue's
                                  copy (SP_STEAL_STALE): KVM's record absent or failing its check */
  SP_STAT_COUNTER_UNSEEN_ON_CPU, /* probes that saw a thread of the process on a CPU with no
                                    switch-in noted (SP_COUNTERS_UNCOUNTED_THREAD) */
  SP_STAT_COUNTER_UNSEEN_SELF,   /* probes whose own thread had no switch-in noted (likewise) */
  SP_STAT_COUNTER_UNKNOWN_RUN,   /* windows holding a run of unknown length or a thread left out
                                    of a full table (likewise) */
  SP_STAT_COUNT,
};

#endif /* SEQPOINT_COLLECTORS_EBPF_ITERATION_PROBE_H_ */
