// SPDX-License-Identifier: GPL-2.0
/* The return of every CUDA synchronisation of the watched processes (sync_probe.h,
 * sync_probes.h): when a host thread returns from cudaStreamSynchronize / cuCtxSynchronize /
 * a device-to-host copy, the GPU work it waited for is done. One uretprobe per sync function
 * and process (attached per pid, so other processes never fire it); each return overwrites the
 * process's mark with its time and bumps its count. No ring buffer: the agent reads the mark
 * when it closes a measured window (collectors/gpu/sync_window.h), and a count that moved since
 * the window's CPU end says a sync came after it. */
/* vmlinux.h must come first: the libbpf headers build on its types. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
// clang-format on

#include "sync_probe.h"

char LICENSE[] SEC("license") = "GPL";

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SP_SYNC_MAX_PIDS);
  __type(key, __u32); /* tgid */
  __type(value, struct sp_sync_mark);
} sync_marks SEC(".maps");

/* Threads inside a device-to-host cudaMemcpy (entry seen, return not yet). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SP_SYNC_MAX_THREADS);
  __type(key, __u32); /* tid */
  __type(value, __u8);
} d2h_open SEC(".maps");

SEC("uprobe")
int sp_sync_copy_entry(struct pt_regs* ctx) {
  __u32 tid = (__u32)bpf_get_current_pid_tgid();
  /* cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind): an enum,
   * so only the low 32 bits of the register are defined. */
  if ((PT_REGS_PARM4(ctx) & 0xffffffffull) != SP_SYNC_MEMCPY_D2H) return 0;
  __u8 one = 1;
  bpf_map_update_elem(&d2h_open, &tid, &one, BPF_ANY);
  return 0;
}

SEC("uretprobe")
int sp_sync_return(struct pt_regs* ctx) {
  __u64 now = bpf_ktime_get_ns();
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = id >> 32, tid = (__u32)id;
  __u32 cookie = (__u32)bpf_get_attach_cookie(ctx);
  if (cookie & SP_SYNC_COOKIE_D2H_ONLY) {
    if (!bpf_map_lookup_elem(&d2h_open, &tid)) return 0; /* a host-to-device or D2D copy */
    bpf_map_delete_elem(&d2h_open, &tid);
  }
  struct sp_sync_mark* m = bpf_map_lookup_elem(&sync_marks, &pid);
  if (!m) return 0; /* not watched (or no longer): the user side seeds the entry */
  /* Two threads of one process may race here; the later write wins, and either is a sync
   * return after the window's end, which is all the reader asks. */
  m->last_ns = now;
  m->function = cookie & SP_SYNC_COOKIE_INDEX_MASK;
  __sync_fetch_and_add(&m->count, 1);
  return 0;
}
