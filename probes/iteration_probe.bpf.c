// SPDX-License-Identifier: GPL-2.0
/* Iteration probes: the kernel side of IterationProbes (iteration_probes.h).
 *
 * Two sources of iterations, one event stream:
 *  - USDT seqpoint:iteration_begin(iter, seq_len, batch, tokens) / iteration_end(iter), fired
 *    by the SDK header, the Python module or the example trainer;
 *  - zero-code uprobes: an "SL function" whose argument carries the SL (an RNN forward call, a
 *    GEMM's token dimension) and a "boundary function" called once at the end of an iteration.
 *    The uprobe's BPF cookie carries the probe index and role.
 *
 * Invariants:
 *  - Every begin is matched to its end through `inflight` (pid, iter), so two threads of one
 *    process may have iterations open at once; `thread_open` remembers each thread's open
 *    iteration so that a thread beginning again without an end reports the old one ABANDONED.
 *  - Nothing is dropped silently: a full ring buffer counts SP_STAT_LOST (and the pid's `lost`),
 *    a full open-iteration table counts SP_STAT_INFLIGHT_FULL.
 *  - Wakeups are batched: records are submitted with BPF_RB_NO_WAKEUP, and one wakeup is
 *    forced each time the backlog crosses a multiple of `wakeup_bytes`; the records of
 *    iterations the agent asked hooks for wake the consumer at once (it starts counters at
 *    begin and reads them at end).
 * Runs in the traced threads, any number at once: shared counters use atomics or per-CPU maps.
 */
/* vmlinux.h must come first: the libbpf headers build on its types. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
/* libbpf's USDT spec table: one entry per (attach, distinct argument spec). The default 256 is
 * about 100 attached processes; 4096 covers any node. */
#define BPF_USDT_MAX_SPEC_CNT 4096
#include <bpf/usdt.bpf.h>
// clang-format on

#include "iteration_probe.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the user side before load (rodata). */
const volatile __u32 max_seq_len = 1u << 20;
const volatile __u64 wakeup_bytes = 256 * 1024;
/* enum sp_hook_mode; written by the user side at run time through the mmapped .bss. */
__u32 hook_mode = SP_HOOK_NONE;

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 8 * 1024 * 1024); /* resized by the user side */
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, struct sp_inflight_key);
  __type(value, struct sp_inflight);
} inflight SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32); /* tid */
  __type(value, struct sp_thread_open);
} thread_open SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32); /* tgid */
  __type(value, struct sp_pid_state);
} pids SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, struct sp_wanted_iter_key);
  __type(value, __u8);
} wanted_iters SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, struct sp_wanted_sl_key);
  __type(value, __u32); /* remaining count; 0xffffffff: always */
} wanted_sls SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, SP_MAX_ZERO_CODE_PROBES);
  __type(key, __u32);
  __type(value, struct sp_zero_code_config);
} zero_code_config SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, struct sp_zero_code_key);
  __type(value, struct sp_zero_code_state);
} zero_code_state SEC(".maps");

/* Gated probes: the SL each thread's SL function last saw. LRU: entries of exited threads age
 * out without a sweep. Not pinned: after a restart the next descriptor call sets it again. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, struct sp_zero_code_thread_key);
  __type(value, __u32);
} zero_code_pending SEC(".maps");

/* Counters read at the probes (probe_counters.h): the threads of counted processes as the
 * scheduler hook last saw them; the processes' banked totals; the totals at the begin of each
 * hooked iteration of those processes. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SP_MAX_COUNTER_THREADS);
  __type(key, __u64); /* the thread's task_struct address (sp_counter_thread) */
  __type(value, struct sp_counter_thread);
} counter_threads SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1024);
  __type(key, __u32); /* tgid */
  __type(value, struct sp_counter_proc);
} counter_procs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, struct sp_inflight_key);
  __type(value, struct sp_counter_begin);
} counter_begins SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, SP_MAX_CPUS);
  __type(key, __u32); /* CPU */
  __type(value, struct sp_cpu_run);
} cpu_runs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, SP_STAT_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 stat) {
  __u64* v = bpf_map_lookup_elem(&stats, &stat);
  if (v) *v += 1; /* per-CPU slot: no other writer */
}

/* The process's state, or NULL when the user side has not registered it (still attaching) or
 * has unregistered it (detaching): the probe then records nothing, so a half-attached or
 * half-detached process never yields begins without ends or ends without begins. */
static __always_inline struct sp_pid_state* pid_hit(__u32 pid) {
  struct sp_pid_state* ps = bpf_map_lookup_elem(&pids, &pid);
  count(SP_STAT_HITS);
  if (ps) __sync_fetch_and_add(&ps->hits, 1);
  return ps;
}

static __always_inline __u32 check_seq_len(__u64 seq_len) {
  if (seq_len == 0) {
    count(SP_STAT_SL_ZERO);
    return SP_FLAG_SL_ZERO;
  }
  if (seq_len > max_seq_len) {
    count(SP_STAT_SL_HUGE);
    return SP_FLAG_SL_HUGE;
  }
  return 0;
}

/* Copies `src` into the ring buffer. `urgent` wakes the consumer now; otherwise the consumer is
 * woken once wakeup_bytes are pending, or finds the record at its next timed poll. */
static __always_inline void submit(const struct sp_event* src, bool urgent,
                                   struct sp_pid_state* ps) {
  struct sp_event* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count(SP_STAT_LOST);
    if (ps) __sync_fetch_and_add(&ps->lost, 1);
    return;
  }
  __builtin_memcpy(e, src, sizeof(*e));
  __u64 flags = BPF_RB_NO_WAKEUP;
  if (urgent) {
    flags = BPF_RB_FORCE_WAKEUP;
  } else {
    /* Wake when the backlog crosses a multiple of wakeup_bytes: one wakeup per wakeup_bytes
     * of records, not one per record once the consumer lags. (A race between producers can
     * skip one crossing; the next one, or the consumer's poll timeout, covers it.) */
    __u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
    __u64 record = sizeof(*e) + 8; /* + the ring buffer's record header */
    if (avail >= wakeup_bytes && (avail - record) / wakeup_bytes != avail / wakeup_bytes) {
      flags = BPF_RB_FORCE_WAKEUP;
    }
  }
  if (flags == BPF_RB_FORCE_WAKEUP) count(SP_STAT_WAKEUPS);
  bpf_ringbuf_submit(e, flags);
  count(SP_STAT_EVENTS);
  if (ps) __sync_fetch_and_add(&ps->events, 1);
}

/* Takes one unit from a wanted-SL counter; a lost race with another thread means "not wanted"
 * for this iteration rather than a double count. */
static __always_inline bool take_wanted_sl(__u32* left) {
  __u32 old = *left;
  if (old == 0) return false;
  if (old == 0xffffffffu) return true;
  return __sync_val_compare_and_swap(left, old, old - 1) == old;
}

/* Whether the agent wants hooks (a begin event, immediate wakeups) for this iteration. */
static __always_inline bool hook_wanted(__u32 pid, __u64 iter, __u32 seq_len) {
  __u32 mode = *(volatile __u32*)&hook_mode;
  if (mode == SP_HOOK_NONE) return false;
  if (mode == SP_HOOK_ALL) return true;
  struct sp_wanted_iter_key ik = {.pid = pid, .iter = iter};
  if (bpf_map_delete_elem(&wanted_iters, &ik) == 0) return true;
  struct sp_wanted_sl_key sk = {.pid = pid, .seq_len = seq_len};
  __u32* left = bpf_map_lookup_elem(&wanted_sls, &sk);
  if (left) return take_wanted_sl(left);
  sk.seq_len = SP_ANY_SEQ_LEN;
  left = bpf_map_lookup_elem(&wanted_sls, &sk);
  return left && take_wanted_sl(left);
}

#include "probe_counters.bpf.h"

/* Reports and forgets the iteration `tid` left open in `pid`, if any (begin without end). */
static __always_inline void abandon_open_iteration(__u32 pid, __u32 tid, __u64 now,
                                                   struct sp_pid_state* ps) {
  struct sp_thread_open* open = bpf_map_lookup_elem(&thread_open, &tid);
  if (!open || open->pid != pid) return; /* none, or a dead process's reused tid */
  struct sp_inflight_key key = {.pid = pid, .iter = open->iter};
  struct sp_inflight* old = bpf_map_lookup_elem(&inflight, &key);
  if (!old || old->tid != tid) return;
  struct sp_event e = {
      .iter = key.iter,
      .tokens = old->tokens,
      .begin_ns = old->begin_ns,
      .end_ns = 0,
      .pid = pid,
      .tid = tid,
      .seq_len = old->seq_len,
      .batch = old->batch,
      .kind = SP_EVENT_END,
      .flags = old->flags | SP_FLAG_ABANDONED,
  };
  if (bpf_map_delete_elem(&inflight, &key) != 0) return; /* its end won the race */
  if (ps) __sync_fetch_and_add(&ps->open, -1);
  counters_forget(pid, key.iter);
  count(SP_STAT_ABANDONED);
  submit(&e, e.flags & SP_FLAG_HOOKED, ps);
}

SEC("usdt")
int BPF_USDT(sp_usdt_begin, __u64 iter, __u32 seq_len, __u32 batch, __u64 tokens) {
  __u64 now = bpf_ktime_get_ns();
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = id >> 32, tid = (__u32)id;
  struct sp_pid_state* ps = pid_hit(pid);
  if (!ps) return 0;

  abandon_open_iteration(pid, tid, now, ps);

  __u32 flags = check_seq_len(seq_len);
  struct sp_inflight_key key = {.pid = pid, .iter = iter};
  bool duplicate = bpf_map_lookup_elem(&inflight, &key) != NULL;
  if (duplicate) {
    flags |= SP_FLAG_DUPLICATE;
    count(SP_STAT_DUPLICATE);
  } else if (ps && __sync_fetch_and_add(&ps->open, 1) > 0) {
    flags |= SP_FLAG_OVERLAP;
    count(SP_STAT_OVERLAP);
  }
  bool hooked = hook_wanted(pid, iter, seq_len);
  if (hooked) flags |= SP_FLAG_HOOKED;

  struct sp_inflight value = {.tokens = tokens,
                              .begin_ns = now,
                              .seq_len = seq_len,
                              .batch = batch,
                              .tid = tid,
                              .flags = flags};
  if (bpf_map_update_elem(&inflight, &key, &value, BPF_ANY) != 0) {
    count(SP_STAT_INFLIGHT_FULL);
    if (ps && !duplicate) __sync_fetch_and_add(&ps->open, -1);
  } else {
    struct sp_thread_open open = {.iter = iter, .pid = pid};
    bpf_map_update_elem(&thread_open, &tid, &open, BPF_ANY);
  }
  if (hooked) {
    struct sp_event e = {.iter = iter,
                         .tokens = tokens,
                         .begin_ns = now,
                         .pid = pid,
                         .tid = tid,
                         .seq_len = seq_len,
                         .batch = batch,
                         .kind = SP_EVENT_BEGIN,
                         .flags = flags};
    submit(&e, true, ps);
    /* After the wakeup it forces: that cost is the agent's, not the iteration's. */
    counters_begin(pid, iter);
  }
  return 0;
}

SEC("usdt")
int BPF_USDT(sp_usdt_end, __u64 iter) {
  __u64 now = bpf_ktime_get_ns();
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = id >> 32, tid = (__u32)id;
  struct sp_pid_state* ps = pid_hit(pid);
  if (!ps) return 0;

  struct sp_event e = {.iter = iter, .end_ns = now, .pid = pid, .tid = tid, .kind = SP_EVENT_END};
  struct sp_inflight_key key = {.pid = pid, .iter = iter};
  struct sp_inflight* v = bpf_map_lookup_elem(&inflight, &key);
  if (!v) {
    e.flags = SP_FLAG_NO_BEGIN;
    count(SP_STAT_NO_BEGIN);
    submit(&e, false, ps);
    return 0;
  }
  e.tokens = v->tokens;
  e.begin_ns = v->begin_ns;
  e.seq_len = v->seq_len;
  e.batch = v->batch;
  e.flags = v->flags;
  if (bpf_map_delete_elem(&inflight, &key) == 0 && ps) __sync_fetch_and_add(&ps->open, -1);
  struct sp_thread_open* open = bpf_map_lookup_elem(&thread_open, &tid);
  if (open && open->pid == pid && open->iter == iter) bpf_map_delete_elem(&thread_open, &tid);
  if (e.flags & SP_FLAG_HOOKED) counters_end(pid, iter, &e);
  submit(&e, e.flags & SP_FLAG_HOOKED, ps);
  return 0;
}

/* Reads argument `index` (x86-64 SysV: rdi rsi rdx rcx r8 r9, then the stack above the return
 * address) of the probed function at its entry. */
static __always_inline int read_arg(struct pt_regs* ctx, __u32 index, __u64* out) {
  switch (index) {
    case 0:
      *out = PT_REGS_PARM1(ctx);
      return 0;
    case 1:
      *out = PT_REGS_PARM2(ctx);
      return 0;
    case 2:
      *out = PT_REGS_PARM3(ctx);
      return 0;
    case 3:
      *out = PT_REGS_PARM4(ctx);
      return 0;
    case 4:
      *out = PT_REGS_PARM5(ctx);
      return 0;
    case 5:
      *out = ctx->r9;
      return 0;
    default: {
      if (index > 15) return -1;
      __u64 addr = PT_REGS_SP(ctx) + 8 * (__u64)(index - 5);
      return bpf_probe_read_user(out, sizeof(*out), (const void*)addr);
    }
  }
}

/* One SL call of an iteration (an ungated SL function, or a passed gate). */
static __always_inline void add_sl(__u32 pid, __u32 tid, __u32 probe, struct sp_pid_state* ps,
                                   const struct sp_zero_code_config* cfg, __u32 seq_len,
                                   __u64 now) {
  struct sp_zero_code_key key = {.pid = pid, .probe = probe};
  struct sp_zero_code_state* st = bpf_map_lookup_elem(&zero_code_state, &key);
  if (!st) {
    struct sp_zero_code_state fresh = {.begin_ns = now};
    bpf_map_update_elem(&zero_code_state, &key, &fresh, BPF_NOEXIST);
    st = bpf_map_lookup_elem(&zero_code_state, &key);
    if (!st) return;
  }
  /* Threads of one process race here (e.g. two streams); a lost update skews one SL of one
   * iteration, which the boundary reports anyway. */
  if (st->calls == 0) {
    st->seq_len = seq_len;
    if (hook_wanted(pid, st->iter, seq_len)) {
      st->flags |= SP_FLAG_HOOKED;
      struct sp_event e = {.iter = st->iter,
                           .begin_ns = st->begin_ns,
                           .pid = pid,
                           .tid = tid,
                           .seq_len = seq_len,
                           .kind = SP_EVENT_BEGIN,
                           .flags = SP_FLAG_HOOKED | SP_FLAG_ZERO_CODE,
                           .probe = probe + 1};
      submit(&e, true, ps);
      counters_begin(pid, st->iter);
    }
  } else if (cfg->reduce == SP_REDUCE_MAX) {
    if (seq_len > st->seq_len) st->seq_len = seq_len;
  } else if (cfg->reduce == SP_REDUCE_LAST) {
    st->seq_len = seq_len;
  }
  st->calls += 1;
}

SEC("uprobe")
int sp_sl_call(struct pt_regs* ctx) {
  __u64 now = bpf_ktime_get_ns();
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = id >> 32, tid = (__u32)id;
  __u32 probe = bpf_get_attach_cookie(ctx) & SP_COOKIE_PROBE_MASK;
  struct sp_pid_state* ps = pid_hit(pid);
  if (!ps) return 0;
  struct sp_zero_code_config* cfg = bpf_map_lookup_elem(&zero_code_config, &probe);
  if (!cfg) return 0;

  __u64 raw = 0;
  if (read_arg(ctx, cfg->arg_index, &raw) != 0) {
    count(SP_STAT_ARG_FAULT);
    return 0;
  }
  if (cfg->deref) {
    __u64 pointee = 0;
    if (bpf_probe_read_user(&pointee, cfg->arg_bytes == 4 ? 4 : 8, (const void*)raw) != 0) {
      count(SP_STAT_ARG_FAULT);
      return 0;
    }
    raw = pointee;
  }
  if (cfg->arg_bytes == 4) raw &= 0xffffffffull;
  __u32 seq_len = raw > 0xffffffffull ? 0xffffffffu : (__u32)raw;
  if (cfg->gated) { /* only recorded: the gate decides whether it is an iteration's */
    struct sp_zero_code_thread_key tk = {.pid = pid, .tid = tid, .probe = probe};
    bpf_map_update_elem(&zero_code_pending, &tk, &seq_len, BPF_ANY);
    return 0;
  }
  add_sl(pid, tid, probe, ps, cfg, seq_len, now);
  return 0;
}

/* The gate of a gated probe (cudnnRNNForward): passes when its argument gate_arg equals
 * gate_value (CUDNN_FWD_MODE_TRAINING), with the SL its thread's SL function last recorded. */
SEC("uprobe")
int sp_gate(struct pt_regs* ctx) {
  __u64 now = bpf_ktime_get_ns();
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = id >> 32, tid = (__u32)id;
  __u32 probe = bpf_get_attach_cookie(ctx) & SP_COOKIE_PROBE_MASK;
  struct sp_pid_state* ps = pid_hit(pid);
  if (!ps) return 0;
  struct sp_zero_code_config* cfg = bpf_map_lookup_elem(&zero_code_config, &probe);
  if (!cfg || !cfg->gated) return 0;
  __u64 raw = 0;
  if (read_arg(ctx, cfg->gate_arg, &raw) != 0) {
    count(SP_STAT_ARG_FAULT);
    return 0;
  }
  /* An enum or int argument: compare its low 32 bits (the upper half of the register is
   * undefined for a 32-bit argument). */
  if ((raw & 0xffffffffull) != (cfg->gate_value & 0xffffffffull)) return 0;
  struct sp_zero_code_thread_key tk = {.pid = pid, .tid = tid, .probe = probe};
  __u32* seq_len = bpf_map_lookup_elem(&zero_code_pending, &tk);
  if (!seq_len) {
    count(SP_STAT_GATE_NO_SL);
    return 0;
  }
  add_sl(pid, tid, probe, ps, cfg, *seq_len, now);
  return 0;
}

SEC("uprobe")
int sp_boundary(struct pt_regs* ctx) {
  __u64 now = bpf_ktime_get_ns();
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = id >> 32, tid = (__u32)id;
  __u32 probe = bpf_get_attach_cookie(ctx) & SP_COOKIE_PROBE_MASK;
  struct sp_pid_state* ps = pid_hit(pid);
  if (!ps) return 0;

  struct sp_zero_code_key key = {.pid = pid, .probe = probe};
  struct sp_zero_code_state* st = bpf_map_lookup_elem(&zero_code_state, &key);
  if (!st) { /* first boundary after attach: iteration 0 starts here */
    struct sp_zero_code_state fresh = {.begin_ns = now};
    bpf_map_update_elem(&zero_code_state, &key, &fresh, BPF_NOEXIST);
    return 0;
  }
  if (st->calls == 0) {
    /* A burst of boundary calls (one all-reduce per gradient bucket): the next iteration
     * starts after the last of them, or (window=step) stays where the first ended the last
     * iteration, so consecutive windows tile the run. */
    count(SP_STAT_EMPTY_BOUNDARY);
    struct sp_zero_code_config* cfg = bpf_map_lookup_elem(&zero_code_config, &probe);
    if (!cfg || cfg->window != SP_WINDOW_STEP) st->begin_ns = now;
    return 0;
  }
  __u32 flags = st->flags | SP_FLAG_ZERO_CODE | check_seq_len(st->seq_len);
  struct sp_event e = {.iter = st->iter,
                       .begin_ns = st->begin_ns,
                       .end_ns = now,
                       .pid = pid,
                       .tid = tid,
                       .seq_len = st->seq_len,
                       .kind = SP_EVENT_END,
                       .flags = flags,
                       .probe = probe + 1};
  if (flags & SP_FLAG_HOOKED) counters_end(pid, st->iter, &e);
  st->iter += 1;
  st->begin_ns = now;
  st->calls = 0;
  st->seq_len = 0;
  st->flags = 0;
  submit(&e, flags & SP_FLAG_HOOKED, ps);
  return 0;
}
