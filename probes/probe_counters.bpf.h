/* Software counters read by the iteration probes themselves: the kernel half of
 * probe_counters.h. Included by iteration_probe.bpf.c after its maps (counter_threads,
 * counter_procs, counter_begins) and count().
 *
 * Every thread of a counted process, probe to probe. The scheduler hook (sp_sched_switch) sees
 * each of the process's threads switch in and out, whoever they are and whenever they were
 * created: at a switch-in it notes the time, the thread's runtime and fault counts; at a
 * switch-out it banks the run into the process (its runtime by the scheduler's own account,
 * se.sum_exec_runtime, one switch, faults; migrations happen while a thread waits and are banked
 * at its next switch-in). A thread that is on a CPU at a probe is counted up to that instant: the
 * process keeps how many of its threads are on a CPU and the sum of their switch-in times, so its
 * time on CPUs now is banked + running x now - in_sum, for every thread however long it has been
 * running (an OpenMP pool spinning across the probe, a data-loader thread). Page faults of a
 * thread on another CPU cannot be read from the probing thread: only those are left out
 * (SP_COUNTERS_OTHERS_RUNNING) when a sibling runs at a probe.
 *
 * Steal: the running part is wall time since the switch-in, and on a VM that includes what the
 * hypervisor stole meanwhile, which the banked part (sum_exec_runtime, what the workload's own
 * CPU clocks read) leaves out: a window with both CPUs of a 2-vCPU VM busy in a steal burst read
 * the burst as CPU time no thread had. So the hook
 * notes each thread's CPU and that CPU's steal time at its switch-in (cpu_runs, steal_in), and a
 * probe subtracts, for each thread of the process on a CPU, the steal of its CPU since
 * (sp_probe_walk). On a KVM guest the steal is read where the kernel reads it, the per-CPU
 * steal_time record the hypervisor updates at every entry of the vCPU: up to date for a running
 * vCPU, so the subtraction is exact, as the threads' own CPU clocks have it. A vCPU that the
 * hypervisor has preempted at the probe (steal_time.preempted) has not published its steal yet:
 * that window's task-clock is left out (SP_COUNTERS_STOLEN). Elsewhere the run queue's copy is
 * used, brought up to date at the CPU's switches and ticks only: what was stolen in the last tick
 * before a probe is not visible yet, so a window that lost more than 1/200 of its CPU time to
 * steal (a burst, whose unseen tail may be as large) has its task-clock left out too.
 *
 * Unseen switch-ins: sometimes (about one in 10^5 switches on some 6.18 VMs; one in 450 under CPU
 * hogs on VMs whose own pid-1 threads are never reported switching out, ftrace's sched_switch
 * event missing them too) the sched_switch tracepoint reports a thread switching out with no switch-in since its last
 * switch-out. The scheduler's runtime (sum_exec_runtime), which only grows while the thread runs,
 * says exactly how long it ran unseen: that is banked at the switch-out (unseen_runs), so a
 * window is exact unless one of its probes fell inside the unseen run. The probes look at what
 * every CPU runs now (its run queue's curr): a thread of the process on a CPU with no run noted
 * flags the window (SP_COUNTERS_UNCOUNTED_THREAD).
 *
 * Why not per-thread perf events (the earlier design): bpf_perf_event_read_value reads a task's
 * event only from inside that task, so a sibling on a CPU at a probe was missing its run since
 * its switch-in (up to a time slice per thread, the errors that showed under CPU contention), and
 * every thread needed an event opened from user space before it was counted.
 *
 * Concurrency: a thread's record is written by the hook on the thread's own CPU only. The
 * process's sums are written by the hooks of its threads on any CPU: each update is bracketed by
 * busy += 1 ... gen += 1, busy -= 1 (atomics, full barriers), and a reader retries until it read
 * with busy == 0 and the same gen before and after (sp_counter_proc). A probe that cannot get a
 * consistent snapshot in a few tries flags its window SP_COUNTERS_READ_FAILED.
 */
#ifndef SEQPOINT_PROBES_PROBE_COUNTERS_BPF_H_
#define SEQPOINT_PROBES_PROBE_COUNTERS_BPF_H_

/* Set by the user side before load: 1 when the kernel can run the counter path. */
const volatile __u32 counters_on = 0;

/* Set by the user side before load: the CPUs the steal correction looks at (<= SP_MAX_CPUS). */
const volatile __u32 steal_cpus = 0;

/* Set by the user side before load: where KVM's per-CPU steal record (steal_time, what the
 * kernel's steal clock reads, arch/x86/kernel/kvm.c) lies relative to the same CPU's run queue
 * (runqueues), both per-CPU variables at fixed offsets in the per-CPU area (vmlinux BTF); 0 when
 * the kernel has no such record. Typed ksyms cannot be used: they need kallsyms of every
 * variable (CONFIG_KALLSYMS_ALL), which kernels often lack. */
const volatile __u64 steal_time_off = 0;

#define SP_TASK_DEAD 0x80 /* include/linux/sched.h: the task's last switch-out */
#define SP_SNAPSHOT_TRIES 8

/* Whether this kernel tells steal time to the scheduler and where a task's run queue is
 * (CONFIG_PARAVIRT_TIME_ACCOUNTING, CONFIG_FAIR_GROUP_SCHED): CO-RE constants. */
#define SP_STEAL_KNOWN                                               \
  (bpf_core_field_exists(struct rq, prev_steal_time_rq) &&           \
   bpf_core_field_exists(struct task_struct, se.cfs_rq) &&           \
   bpf_core_field_exists(struct cfs_rq, rq))

/* The struct rq of the CPU `task` is on (0: not known). */
static __always_inline __u64 rq_of(struct task_struct* task) {
  if (!SP_STEAL_KNOWN) return 0;
  struct cfs_rq* c = BPF_CORE_READ(task, se.cfs_rq);
  if (!c) return 0;
  return (__u64)BPF_CORE_READ(c, rq);
}

/* A CPU's steal time, ns since boot, as its scheduler clock was last updated (at every switch
 * and tick of that CPU): fresh in the sched_switch hook, up to a tick old at a probe. */
static __always_inline __u64 rq_steal(__u64 rq) {
  if (!SP_STEAL_KNOWN || rq == 0) return 0;
  struct rq* r = (struct rq*)rq;
  return BPF_CORE_READ(r, prev_steal_time_rq);
}

/* The steal time of `cpu` (whose run queue is `rq`) now. KVM's record where it is the kernel's
 * source: it is never behind the run queue's copy, and that copy stays 0 where the kernel does
 * not subtract steal (no-steal-acc). Otherwise the run queue's copy (SP_STEAL_STALE in *how). */
static __always_inline __u64 cpu_steal(__u32 cpu, __u64 rq, __u32* how) {
  if (!SP_STEAL_KNOWN) return 0;
  __u64 stale = rq_steal(rq);
  __u64 st = steal_time_off == 0 || rq == 0 ? 0 : rq + steal_time_off;
  if (st != 0) {
    struct kvm_steal_time* kvm = (struct kvm_steal_time*)st;
    __u64 fresh = BPF_CORE_READ(kvm, steal);
    /* Checked against the run queue's copy: never behind it, and not far ahead (100 ms). */
    if (fresh >= stale && fresh - stale < 100000000ull && (stale != 0 || fresh == 0)) {
      if (BPF_CORE_READ(kvm, preempted) & 1) *how |= SP_STEAL_PREEMPTED;
      return fresh;
    }
  }
  *how |= SP_STEAL_STALE;
  return stale;
}

struct sp_probe_walk {
  __u32 pid;
  __u32 how;    /* enum sp_steal_how */
  __u64 sum;    /* steal since their switch-in of the threads of pid on a CPU */
  __u32 unseen; /* a thread of pid runs on a CPU with no run noted */
  __u32 pad;
};

/* Whether what CPU `cpu` runs now is a thread of `pid` that the hook did not see switch in. */
static __always_inline bool runs_unseen(__u32 cpu, __u32 pid) {
  struct sp_cpu_run* r = bpf_map_lookup_elem(&cpu_runs, &cpu);
  if (!r || r->rq == 0) return false;
  struct rq* rq = (struct rq*)r->rq;
  struct task_struct* curr = BPF_CORE_READ(rq, curr);
  if (!curr || BPF_CORE_READ(curr, tgid) != pid) return false;
  __u64 key = (__u64)curr;
  struct sp_counter_thread* t = bpf_map_lookup_elem(&counter_threads, &key);
  return !t || t->pid != pid || t->state != SP_THREAD_ON;
}

/* bpf_loop body: for CPU `cpu`, a thread of w->pid on it that the hook did not see switch in,
 * and the steal of the CPU since its thread of w->pid switched in, if it runs one. */
static long walk_cpu(__u64 cpu, void* arg) {
  struct sp_probe_walk* w = arg;
  if (runs_unseen((__u32)cpu, w->pid)) w->unseen = 1;
  if (!SP_STEAL_KNOWN) return 0;
  __u32 key = (__u32)cpu;
  struct sp_cpu_run* r = bpf_map_lookup_elem(&cpu_runs, &key);
  if (!r || r->tgid != w->pid) return 0;
  __u64 task = r->task;
  struct sp_counter_thread* t = bpf_map_lookup_elem(&counter_threads, &task);
  if (!t || t->pid != w->pid || t->state != SP_THREAD_ON || t->steal_in == 0) return 0;
  __u64 steal = cpu_steal(key, r->rq, &w->how);
  if (steal > t->steal_in) w->sum += steal - t->steal_in;
  return 0;
}

/* At a probe, over every CPU: the steal since the switch-in of every thread of `pid` on a CPU now
 * (what the wall-time part of the process's time on a CPU holds that its threads never ran), and
 * whether a thread of `pid` runs unseen. One array read per CPU, a hash lookup only where a thread
 * of `pid` runs. steal_cpus is 0 where the kernel has no bpf_loop (Linux < 5.17): the call is then
 * dead code the verifier drops, and unseen runs flag their windows at their switch-out instead. */
static __always_inline void sp_probe_walk(struct sp_probe_walk* w) {
  if (steal_cpus == 0) return;
  bpf_loop(steal_cpus, walk_cpu, w, 0);
}

/* Whether a probe sees the threads of a process that run unseen (sp_probe_walk). */
static __always_inline bool sp_sees_unseen(void) {
  return steal_cpus != 0 && SP_STEAL_KNOWN;
}

/* Notes that thread `task` of `tgid` runs on this CPU (tgid 0: a counted thread left it). */
static __always_inline void note_cpu_run(__u32 tgid, __u64 task, __u64 rq) {
  __u32 cpu = bpf_get_smp_processor_id();
  struct sp_cpu_run* r = bpf_map_lookup_elem(&cpu_runs, &cpu);
  if (!r) return;
  if (tgid == 0 && r->task != task) return;
  r->tgid = tgid;
  r->task = task;
  if (rq) r->rq = rq;
}

static __always_inline void proc_enter(struct sp_counter_proc* p) {
  __sync_fetch_and_add(&p->busy, 1);
}
static __always_inline void proc_leave(struct sp_counter_proc* p) {
  __sync_fetch_and_add(&p->gen, 1);
  __sync_fetch_and_add(&p->busy, -1);
}

/* Reads the process's totals at `*now` (taken inside the snapshot) and the current thread's own
 * fault counts since its switch-in. Returns false when no consistent snapshot was had. */
static __always_inline bool proc_snapshot(struct sp_counter_proc* p, struct sp_counter_totals* out,
                                          __u64* now, __u64* running, __u64* unknown, __u64* untracked, __u64* execs) {
  for (int i = 0; i < SP_SNAPSHOT_TRIES; ++i) {
    __u32 b1 = *(volatile __u32*)&p->busy;
    __u64 g1 = *(volatile __u64*)&p->gen;
    __u64 r = *(volatile __u64*)&p->running;
    __u64 in = *(volatile __u64*)&p->in_sum;
    out->on_cpu_ns = *(volatile __u64*)&p->banked.on_cpu_ns;
    out->switches = *(volatile __u64*)&p->banked.switches;
    out->migrations = *(volatile __u64*)&p->banked.migrations;
    out->min_flt = *(volatile __u64*)&p->banked.min_flt;
    out->maj_flt = *(volatile __u64*)&p->banked.maj_flt;
    *unknown = *(volatile __u64*)&p->unknown_runs;
    *untracked = *(volatile __u64*)&p->untracked;
    *execs = *(volatile __u64*)&p->execs;
    __u64 t = bpf_ktime_get_ns();
    __u32 b2 = *(volatile __u32*)&p->busy;
    __u64 g2 = *(volatile __u64*)&p->gen;
    if (b1 == 0 && b2 == 0 && g1 == g2) {
      out->on_cpu_ns += r * t - in;
      *now = t;
      *running = r;
      return true;
    }
    __sync_fetch_and_add(&p->snapshot_retries, 1);
  }
  return false;
}

/* The process's totals now, with the flags they carry. `self_faults` adds the probing thread's
 * own faults since its switch-in (it is on a CPU, so they are not banked yet). */
static __always_inline __u32 counters_now(__u32 pid, struct sp_counter_proc* p,
                                          struct sp_counter_begin* out) {
  __u32 flags = 0;
  __u64 running = 0;
  if (!proc_snapshot(p, &out->values, &out->now_ns, &running, &out->unknown_runs,
                     &out->untracked, &out->execs)) {
    count(SP_STAT_COUNTER_READ_FAIL);
    return SP_COUNTERS_READ_FAILED;
  }
  struct sp_probe_walk w = {.pid = pid};
  sp_probe_walk(&w);
  out->steal_ns = running > 0 ? w.sum : 0;
  out->steal_how = w.how;
  out->values.on_cpu_ns -= out->steal_ns < out->values.on_cpu_ns ? out->steal_ns : 0;
  if (w.unseen) {
    flags |= SP_COUNTERS_UNCOUNTED_THREAD;
    count(SP_STAT_COUNTER_UNSEEN_ON_CPU);
  }
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  __u64 self = (__u64)task;
  struct sp_counter_thread* t = bpf_map_lookup_elem(&counter_threads, &self);
  if (t && t->pid == pid && t->state == SP_THREAD_ON) {
    out->values.min_flt += BPF_CORE_READ(task, min_flt) - t->min_flt;
    out->values.maj_flt += BPF_CORE_READ(task, maj_flt) - t->maj_flt;
    if (running > 1) flags |= SP_COUNTERS_OTHERS_RUNNING;
  } else {
    flags |= SP_COUNTERS_UNCOUNTED_THREAD; /* the probing thread's own switch-in was not seen */
    count(SP_STAT_COUNTER_UNSEEN_SELF);
  }
  return flags;
}

/* At the begin of a hooked iteration: remembers the process's totals. */
static __always_inline void counters_begin(__u32 pid, __u64 iter) {
  if (!counters_on) return;
  struct sp_counter_proc* p = bpf_map_lookup_elem(&counter_procs, &pid);
  if (!p) return;
  struct sp_counter_begin b = {};
  b.flags = counters_now(pid, p, &b);
  struct sp_inflight_key key = {.pid = pid, .iter = iter};
  bpf_map_update_elem(&counter_begins, &key, &b, BPF_ANY);
}

static __always_inline __u64 total_of(const struct sp_counter_totals* v, __u32 kind) {
  switch (kind) {
    case SP_KIND_ON_CPU_NS:
      return v->on_cpu_ns;
    case SP_KIND_SWITCHES:
      return v->switches;
    case SP_KIND_MIGRATIONS:
      return v->migrations;
    case SP_KIND_FAULTS:
      return v->min_flt + v->maj_flt;
    case SP_KIND_MIN_FAULTS:
      return v->min_flt;
    default:
      return v->maj_flt;
  }
}

/* Whether `flags` leaves a counter of `kind` out. */
static __always_inline bool counter_left_out(__u32 flags, __u32 kind) {
  if (flags & (SP_COUNTERS_UNCOUNTED_THREAD | SP_COUNTERS_READ_FAILED | SP_COUNTERS_EXEC)) {
    return true;
  }
  if (kind == SP_KIND_ON_CPU_NS && (flags & SP_COUNTERS_STOLEN)) return true;
  bool faults = kind == SP_KIND_FAULTS || kind == SP_KIND_MIN_FAULTS || kind == SP_KIND_MAJ_FAULTS;
  return faults && (flags & SP_COUNTERS_OTHERS_RUNNING);
}

/* At its end: the deltas since the begin, into the end record; a counter the probes cannot
 * stand behind is left out of counter_mask, and counter_flags says why. */
static __always_inline void counters_end(__u32 pid, __u64 iter, struct sp_event* e) {
  if (!counters_on) return;
  struct sp_inflight_key key = {.pid = pid, .iter = iter};
  struct sp_counter_begin* b = bpf_map_lookup_elem(&counter_begins, &key);
  if (!b) return;
  struct sp_counter_proc* p = bpf_map_lookup_elem(&counter_procs, &pid);
  if (p) {
    struct sp_counter_begin now = {};
    __u32 flags = b->flags | counters_now(pid, p, &now);
    if (now.unknown_runs != b->unknown_runs || now.untracked != b->untracked) {
      flags |= SP_COUNTERS_UNCOUNTED_THREAD;
      count(SP_STAT_COUNTER_UNKNOWN_RUN);
    }
    if (now.execs != b->execs) flags |= SP_COUNTERS_EXEC;
    struct task_struct* task = (struct task_struct*)bpf_get_current_task();
    __u32 cpus = (__u32)BPF_CORE_READ(task, nr_cpus_allowed);
    __u64 wall = now.now_ns > b->now_ns ? now.now_ns - b->now_ns : 0;
    __u32 n = p->count;
    __u32 mask = 0;
    /* The steal subtracted in this window: at end less at begin (a thread on a CPU at both has
     * its steal before the begin in both). Much of it: a burst, whose last tick is not seen.
     * Conservative: a thread on a CPU at begin that left it inside counts its steal from before
     * the begin here too, though that was subtracted exactly. */
    __u64 steal = now.steal_ns > b->steal_ns ? now.steal_ns - b->steal_ns
                                             : b->steal_ns - now.steal_ns;
    const __u32 how = b->steal_how | now.steal_how;
    bool stolen = (how & SP_STEAL_PREEMPTED) != 0; /* a vCPU's steal not published yet */
    /* Which steal source served this window, for user space to report (steal_source()). */
    if (how & SP_STEAL_STALE) count(SP_STAT_COUNTER_STEAL_STALE);
    if (steal != 0) {
      count(SP_STAT_COUNTER_STEAL);
      /* Read from the run queues' copies, the steal of a CPU's last tick is not seen. */
      __u64 cpu_ns = now.values.on_cpu_ns - b->values.on_cpu_ns;
      if ((how & SP_STEAL_STALE) &&
          (now.values.on_cpu_ns < b->values.on_cpu_ns || steal * 200 > cpu_ns)) {
        stolen = true;
      }
    }
    if (stolen) {
      flags |= SP_COUNTERS_STOLEN;
      count(SP_STAT_COUNTER_STOLEN);
    }
    e->steal_ns = steal;
#pragma unroll
    for (__u32 i = 0; i < SP_MAX_COUNTERS; ++i) {
      if (i >= n) continue;
      __u32 kind = p->kinds[i];
      if (counter_left_out(flags, kind)) continue;
      __u64 before = total_of(&b->values, kind), after = total_of(&now.values, kind);
      if (!sp_counter_plausible(before, after, kind, wall, cpus)) {
        flags |= SP_COUNTERS_IMPLAUSIBLE;
        count(SP_STAT_COUNTER_IMPLAUSIBLE);
        continue;
      }
      e->counters[i] = after - before;
      mask |= 1u << i;
    }
    /* Flags that left nothing out (a sibling on a CPU with no fault counter armed) are not
     * news: the record carries flags only when a counter is missing. */
    if (mask == (1u << n) - 1) flags = 0;
    e->counter_mask = mask;
    e->counter_flags = flags;
    e->cpus = cpus;
    count(SP_STAT_COUNTER_WINDOWS);
    if (flags != 0) count(SP_STAT_COUNTER_FLAGGED);
  }
  bpf_map_delete_elem(&counter_begins, &key);
}

/* Forgets the begin of an iteration that will have no end record with counters. */
static __always_inline void counters_forget(__u32 pid, __u64 iter) {
  if (!counters_on) return;
  struct sp_inflight_key key = {.pid = pid, .iter = iter};
  bpf_map_delete_elem(&counter_begins, &key);
}

/* `prev` leaves its CPU at `now`: banks its run into its process. */
static __always_inline void switch_out(struct task_struct* prev, __u64 now) {
  __u32 tgid = BPF_CORE_READ(prev, tgid);
  struct sp_counter_proc* p = bpf_map_lookup_elem(&counter_procs, &tgid);
  if (!p) return;
  __u64 key = (__u64)prev;
  struct sp_counter_thread* t = bpf_map_lookup_elem(&counter_threads, &key);
  const bool dead = (BPF_CORE_READ(prev, __state) & SP_TASK_DEAD) != 0;
  /* The scheduler's own account of the thread's runs (update_curr ran just before this
   * tracepoint): what CLOCK_THREAD_CPUTIME_ID reads, without the time a hypervisor stole. */
  const __u64 runtime = BPF_CORE_READ(prev, se.sum_exec_runtime);
  if (t && t->pid == tgid) {
    proc_enter(p);
    if (t->state == SP_THREAD_ON) {
      __u64 ran = runtime - t->runtime_in;
      if (t->runtime_in == 0 || runtime < t->runtime_in) { /* seeded on a CPU: wall less steal */
        __u32 how = 0;
        __u64 steal = cpu_steal(bpf_get_smp_processor_id(), rq_of(prev), &how);
        ran = now - t->in_ns;
        if (t->steal_in != 0 && steal > t->steal_in && steal - t->steal_in < ran) {
          ran -= steal - t->steal_in;
        }
      }
      __sync_fetch_and_add(&p->banked.on_cpu_ns, ran);
      __sync_fetch_and_add(&p->banked.min_flt, BPF_CORE_READ(prev, min_flt) - t->min_flt);
      __sync_fetch_and_add(&p->banked.maj_flt, BPF_CORE_READ(prev, maj_flt) - t->maj_flt);
      __sync_fetch_and_add(&p->in_sum, -t->in_ns);
      __sync_fetch_and_add(&p->running, -1);
    } else if (t->runtime_in != 0 && runtime >= t->runtime_in) {
      /* A switch-in the tracepoint did not report: the runtime says how long it ran since its
       * last switch-out (it grows only while the thread runs). */
      __sync_fetch_and_add(&p->banked.on_cpu_ns, runtime - t->runtime_in);
      __sync_fetch_and_add(&p->banked.min_flt, BPF_CORE_READ(prev, min_flt) - t->min_flt);
      __sync_fetch_and_add(&p->banked.maj_flt, BPF_CORE_READ(prev, maj_flt) - t->maj_flt);
      __sync_fetch_and_add(&p->unseen_runs, 1);
      /* Without a look at the CPUs at the probes, a probe inside it would go unnoticed. */
      if (!sp_sees_unseen()) __sync_fetch_and_add(&p->unknown_runs, 1);
    } else {
      __sync_fetch_and_add(&p->unknown_runs, 1); /* an unseen run of unknown length */
    }
    __sync_fetch_and_add(&p->banked.switches, 1);
    proc_leave(p);
    t->state = SP_THREAD_OFF;
    t->runtime_in = runtime == 0 ? 1 : runtime; /* banked up to here */
    t->min_flt = BPF_CORE_READ(prev, min_flt);
    t->maj_flt = BPF_CORE_READ(prev, maj_flt);
    note_cpu_run(0, key, 0);
    if (dead) bpf_map_delete_elem(&counter_threads, &key);
  } else {
    /* A thread running since before the process was armed and not seeded yet (sp_cnt_seed), or
     * left out of a full table: that run is lost. From here on it is followed. */
    proc_enter(p);
    __sync_fetch_and_add(&p->unknown_runs, 1);
    __sync_fetch_and_add(&p->banked.switches, 1);
    proc_leave(p);
    if (!dead) {
      struct sp_counter_thread off = {.pid = tgid, .state = SP_THREAD_OFF};
      off.migrations = BPF_CORE_READ(prev, se.nr_migrations);
      off.runtime_in = runtime == 0 ? 1 : runtime;
      off.min_flt = BPF_CORE_READ(prev, min_flt);
      off.maj_flt = BPF_CORE_READ(prev, maj_flt);
      bpf_map_update_elem(&counter_threads, &key, &off, BPF_ANY);
    }
  }
}

/* `next` takes a CPU at `now`: notes when, and banks the migrations since its last run. */
static __always_inline void switch_in(struct task_struct* next, __u64 now) {
  __u32 tgid = BPF_CORE_READ(next, tgid);
  struct sp_counter_proc* p = bpf_map_lookup_elem(&counter_procs, &tgid);
  if (!p) return;
  __u64 key = (__u64)next;
  __u64 migrations = BPF_CORE_READ(next, se.nr_migrations);
  struct sp_counter_thread* t = bpf_map_lookup_elem(&counter_threads, &key);
  if (!t || t->pid != tgid) {
    /* First run seen: a thread created since arming starts from zero (it has never run). */
    struct sp_counter_thread fresh = {.pid = tgid, .state = SP_THREAD_OFF};
    fresh.migrations = BPF_CORE_READ(next, se.sum_exec_runtime) == 0 ? 0 : migrations;
    if (bpf_map_update_elem(&counter_threads, &key, &fresh, BPF_ANY) != 0) {
      proc_enter(p);
      __sync_fetch_and_add(&p->untracked, 1);
      proc_leave(p);
      return;
    }
    t = bpf_map_lookup_elem(&counter_threads, &key);
    if (!t) return;
  }
  proc_enter(p);
  if (t->state == SP_THREAD_ON) { /* a switch-out we did not see: forget that run */
    __sync_fetch_and_add(&p->in_sum, -t->in_ns);
    __sync_fetch_and_add(&p->running, -1);
    __sync_fetch_and_add(&p->unknown_runs, 1);
  }
  if (migrations > t->migrations) {
    __sync_fetch_and_add(&p->banked.migrations, migrations - t->migrations);
  }
  __sync_fetch_and_add(&p->in_sum, now);
  __sync_fetch_and_add(&p->running, 1);
  __u64 rq = rq_of(next);
  __u32 how = 0;
  t->steal_in = cpu_steal(bpf_get_smp_processor_id(), rq, &how);
  note_cpu_run(tgid, key, rq);
  t->in_ns = now;
  t->runtime_in = BPF_CORE_READ(next, se.sum_exec_runtime);
  if (t->runtime_in == 0) t->runtime_in = 1; /* a first run: 0 means "not known" */
  t->min_flt = BPF_CORE_READ(next, min_flt);
  t->maj_flt = BPF_CORE_READ(next, maj_flt);
  t->migrations = migrations;
  t->state = SP_THREAD_ON;
  proc_leave(p);
}

/* Run by the user side when it arms a process (an iterator over the process's threads), after
 * the process is registered: every thread gets a record, as if it switched in now if it is on a
 * CPU. A record the hook made first is kept (BPF_NOEXIST); a thread that switches out between the
 * insert and the sums below leaves them as if in the other order (the adds commute). So a window
 * that begins after arming counts every thread, including one that has been spinning on a CPU
 * since before the agent came. */
SEC("iter/task")
int sp_cnt_seed(struct bpf_iter__task* ctx) {
  struct task_struct* task = ctx->task;
  if (!task) return 0;
  __u32 tgid = BPF_CORE_READ(task, tgid);
  struct sp_counter_proc* p = bpf_map_lookup_elem(&counter_procs, &tgid);
  if (!p) return 0;
  __u64 key = (__u64)task;
  __u64 now = bpf_ktime_get_ns();
  const bool on = BPF_CORE_READ(task, on_cpu) != 0;
  struct sp_counter_thread t = {.pid = tgid, .state = on ? SP_THREAD_ON : SP_THREAD_OFF};
  t.migrations = BPF_CORE_READ(task, se.nr_migrations);
  t.min_flt = BPF_CORE_READ(task, min_flt);
  t.maj_flt = BPF_CORE_READ(task, maj_flt);
  if (on) {
    t.in_ns = now;
    __u64 rq = rq_of(task);
    __u32 how = 0;
    t.steal_in = rq ? cpu_steal(BPF_CORE_READ((struct rq*)rq, cpu), rq, &how) : 0;
  } else {
    __u64 runtime = BPF_CORE_READ(task, se.sum_exec_runtime); /* banked up to here */
    t.runtime_in = runtime == 0 ? 1 : runtime;
  }
  if (bpf_map_update_elem(&counter_threads, &key, &t, BPF_NOEXIST) != 0) return 0;
  if (on) {
    proc_enter(p);
    __sync_fetch_and_add(&p->in_sum, now);
    __sync_fetch_and_add(&p->running, 1);
    proc_leave(p);
  }
  return 0;
}

/* Attached by the user side only while some process has counters: two hash lookups per
 * context switch of the node otherwise. */
SEC("raw_tp/sched_switch")
int BPF_PROG(sp_sched_switch, bool preempt, struct task_struct* prev, struct task_struct* next) {
  __u64 now = bpf_ktime_get_ns();
  /* Every CPU's run queue, once: the probes look at what each CPU runs (runs_unseen). */
  __u32 cpu = bpf_get_smp_processor_id();
  struct sp_cpu_run* r = bpf_map_lookup_elem(&cpu_runs, &cpu);
  if (r && r->rq == 0) r->rq = rq_of(next);
  switch_out(prev, now);
  switch_in(next, now);
  return 0;
}

/* exec in a counted process. A thread other than the leader that calls exec takes the leader's
 * tid (fs/exec.c de_thread, exchange_tids), but its record is keyed by its task_struct, which
 * exec keeps: nothing moves. The other threads have died (their last switch-out dropped their
 * records), the old leader too, whatever tid it had by then. Windows across an exec are
 * flagged. */
SEC("raw_tp/sched_process_exec")
int BPF_PROG(sp_cnt_exec, struct task_struct* task, pid_t old_pid) {
  __u32 tgid = BPF_CORE_READ(task, tgid);
  struct sp_counter_proc* p = bpf_map_lookup_elem(&counter_procs, &tgid);
  if (!p) return 0;
  proc_enter(p);
  __sync_fetch_and_add(&p->execs, 1);
  proc_leave(p);
  return 0;
}

#endif /* SEQPOINT_PROBES_PROBE_COUNTERS_BPF_H_ */
