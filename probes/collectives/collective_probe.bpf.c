// SPDX-License-Identifier: GPL-2.0
/* Collective arrival probes: the kernel side of CollectiveProbes (collective_probes.h).
 *
 * One uprobe program, attached at the entry of each collective function a rank's process maps
 * (gloo through libtorch's ProcessGroupGloo, NCCL, RCCL); the BPF cookie names the function.
 * Each entry is one 24-byte record. Nothing is dropped silently: a full ring counts
 * SP_COLL_STAT_LOST. Wakeups are batched as the iteration probes batch them (records submitted
 * with BPF_RB_NO_WAKEUP, one wakeup forced per `wakeup_bytes` of backlog): arrivals are analysed
 * per step after the fact, so a delay bounded by the consumer's poll timeout costs nothing.
 * Runs in the traced threads, any number at once: the counters are per-CPU.
 */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
// clang-format on

#include "collective_probe.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u64 wakeup_bytes = 64 * 1024;

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 20); /* resized by the user side before load */
} arrivals SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, SP_COLL_STAT_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} coll_stats SEC(".maps");

static __always_inline void count(__u32 stat) {
  __u64* v = bpf_map_lookup_elem(&coll_stats, &stat);
  if (v) *v += 1;
}

SEC("uprobe")
int sp_collective_entry(struct pt_regs* ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  struct sp_collective_event e = {};
  e.pid = id >> 32;
  e.tid = (__u32)id;
  e.ts_ns = bpf_ktime_get_ns();
  e.function = (__u32)bpf_get_attach_cookie(ctx);
  count(SP_COLL_STAT_HITS);
  __u64 flags = BPF_RB_NO_WAKEUP;
  __u64 avail = bpf_ringbuf_query(&arrivals, BPF_RB_AVAIL_DATA);
  if (avail / wakeup_bytes != (avail + 32) / wakeup_bytes) {
    flags = BPF_RB_FORCE_WAKEUP;
    count(SP_COLL_STAT_WAKEUPS);
  }
  if (bpf_ringbuf_output(&arrivals, &e, sizeof(e), flags) != 0) count(SP_COLL_STAT_LOST);
  return 0;
}
