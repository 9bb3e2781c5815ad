/* Perf counters read by the iteration probes themselves: the kernel half of probe_counters.h.
 * Included by iteration_probe.bpf.c after its maps (counter_events, counter_threads,
 * counter_procs, counter_begins) and count().
 *
 * Why the counts are banked per process: bpf_perf_event_read_value reads a per-task event only
 * from inside that task (kernel/events/core.c, perf_event_read_local: -EINVAL for another task,
 * -EOPNOTSUPP for an inherited event), so a probe firing in one thread cannot read its siblings.
 * Each counted thread therefore adds its counts since its last bank to the process's `banked`
 * sums whenever it leaves a CPU (sp_sched_switch runs in the leaving task, before perf switches
 * its events out) and whenever it fires a probe. At a probe, `banked` is then the process's
 * total up to that instant, exact for every thread that is off CPU at that moment: at an
 * iteration boundary a trainer's compute threads wait for the next iteration. A sibling that is
 * on a CPU at begin or end is flagged SP_COUNTERS_OTHERS_RUNNING (its run since its switch-in
 * is missing); a thread without events (created since the user side last registered the
 * process's threads) that ran in the window is flagged SP_COUNTERS_UNCOUNTED_THREAD.
 *
 * Concurrency: a thread's `last` is written by that thread only, from its probe or its
 * switch-out; a uprobe program may be preempted by that very switch-out, so `last` advances by
 * compare-and-swap and a lost race banks nothing twice. `banked` and `running` are shared by
 * the process's threads: atomic adds.
 */
#ifndef SEQPOINT_PROBES_PROBE_COUNTERS_BPF_H_
#define SEQPOINT_PROBES_PROBE_COUNTERS_BPF_H_

/* Set by the user side before load: 1 when the kernel can run the counter path. */
const volatile __u32 counters_on = 0;

/* Adds the current thread's counts since its last bank to its process. False on a read error. */
static __always_inline bool bank_current(struct sp_counter_thread* t, struct sp_counter_proc* p) {
  __u32 n = p->count;
  bool ok = true;
#pragma unroll
  for (__u32 i = 0; i < SP_MAX_COUNTERS; ++i) {
    if (i < n) {
      struct bpf_perf_event_value v = {};
      __u64 index = (__u64)t->slot * SP_MAX_COUNTERS + i;
      if (bpf_perf_event_read_value(&counter_events, index, &v, sizeof(v)) != 0) {
        __sync_fetch_and_add(&p->read_errors, 1);
        count(SP_STAT_COUNTER_READ_FAIL);
        ok = false;
      } else {
        __u64 old = t->last[i];
        if (v.counter > old && __sync_val_compare_and_swap(&t->last[i], old, v.counter) == old) {
          __sync_fetch_and_add(&p->banked[i], v.counter - old);
        }
      }
    }
  }
  return ok;
}

/* Banks the calling thread, copies the process's totals into `out`; returns the flags the
 * totals carry (enum sp_counter_flag). */
static __always_inline __u32 counters_now(__u32 pid, __u32 tid, struct sp_counter_proc* p,
                                          __u64* out) {
  __u32 flags = 0;
  __u32 self_on_cpu = 0;
  struct sp_counter_thread* t = bpf_map_lookup_elem(&counter_threads, &tid);
  if (t && t->pid == pid) {
    if (!bank_current(t, p)) flags |= SP_COUNTERS_READ_FAILED;
    self_on_cpu = t->on_cpu;
  } else {
    flags |= SP_COUNTERS_UNCOUNTED_THREAD; /* the probing thread itself has no events yet */
  }
  if (*(volatile __u32*)&p->running > self_on_cpu) flags |= SP_COUNTERS_OTHERS_RUNNING;
#pragma unroll
  for (__u32 i = 0; i < SP_MAX_COUNTERS; ++i) out[i] = *(volatile __u64*)&p->banked[i];
  return flags;
}

/* At the begin of a hooked iteration: remembers the process's totals. */
static __always_inline void counters_begin(__u32 pid, __u32 tid, __u64 iter) {
  if (!counters_on) return;
  struct sp_counter_proc* p = bpf_map_lookup_elem(&counter_procs, &pid);
  if (!p) return;
  struct sp_counter_begin b = {};
  b.flags = counters_now(pid, tid, p, b.values);
  b.uncounted_runs = *(volatile __u64*)&p->uncounted_runs;
  struct sp_inflight_key key = {.pid = pid, .iter = iter};
  bpf_map_update_elem(&counter_begins, &key, &b, BPF_ANY);
}

/* At its end: the deltas since the begin, into the end record. */
static __always_inline void counters_end(__u32 pid, __u32 tid, __u64 iter, struct sp_event* e) {
  if (!counters_on) return;
  struct sp_inflight_key key = {.pid = pid, .iter = iter};
  struct sp_counter_begin* b = bpf_map_lookup_elem(&counter_begins, &key);
  if (!b) return;
  struct sp_counter_proc* p = bpf_map_lookup_elem(&counter_procs, &pid);
  if (p) {
    __u64 now[SP_MAX_COUNTERS] = {};
    __u32 flags = b->flags | counters_now(pid, tid, p, now);
    if (*(volatile __u64*)&p->uncounted_runs != b->uncounted_runs) {
      flags |= SP_COUNTERS_UNCOUNTED_THREAD;
    }
    __u32 n = p->count;
    __u32 mask = 0;
#pragma unroll
    for (__u32 i = 0; i < SP_MAX_COUNTERS; ++i) {
      if (i < n && !(flags & SP_COUNTERS_READ_FAILED)) {
        e->counters[i] = now[i] - b->values[i];
        mask |= 1u << i;
      }
    }
    e->counter_mask = mask;
    e->counter_flags = flags;
    count(SP_STAT_COUNTER_WINDOWS);
  }
  bpf_map_delete_elem(&counter_begins, &key);
}

/* Forgets the begin of an iteration that will have no end record with counters. */
static __always_inline void counters_forget(__u32 pid, __u64 iter) {
  if (!counters_on) return;
  struct sp_inflight_key key = {.pid = pid, .iter = iter};
  bpf_map_delete_elem(&counter_begins, &key);
}

/* Banks a counted thread as it leaves its CPU; counts the runs of a counted process's threads
 * that have no events yet; keeps each process's count of threads on a CPU. Attached by the user
 * side only while some process has counters. */
SEC("raw_tp/sched_switch")
int BPF_PROG(sp_sched_switch, bool preempt, struct task_struct* prev, struct task_struct* next) {
  __u32 tid = BPF_CORE_READ(prev, pid);
  __u32 tgid = BPF_CORE_READ(prev, tgid);
  struct sp_counter_thread* t = bpf_map_lookup_elem(&counter_threads, &tid);
  if (t && t->pid == tgid) {
    struct sp_counter_proc* p = bpf_map_lookup_elem(&counter_procs, &tgid);
    if (p) {
      bank_current(t, p);
      if (t->on_cpu) {
        t->on_cpu = 0;
        __sync_fetch_and_add(&p->running, -1);
      }
    }
  } else {
    struct sp_counter_proc* p = bpf_map_lookup_elem(&counter_procs, &tgid);
    if (p) __sync_fetch_and_add(&p->uncounted_runs, 1);
  }
  tid = BPF_CORE_READ(next, pid);
  t = bpf_map_lookup_elem(&counter_threads, &tid);
  if (t && !t->on_cpu && t->pid == BPF_CORE_READ(next, tgid)) {
    struct sp_counter_proc* p = bpf_map_lookup_elem(&counter_procs, &t->pid);
    if (p) {
      t->on_cpu = 1;
      __sync_fetch_and_add(&p->running, 1);
    }
  }
  return 0;
}

#endif /* SEQPOINT_PROBES_PROBE_COUNTERS_BPF_H_ */
