/* The fake's total-energy counter (fake_nvml.c says which mode reads which):
 *  - A100 mode: +energy_step_mj on every read (the expected deltas are exact).
 *  - Node mode: power_mw over the test's clock plus the real CLOCK_MONOTONIC since nvmlInit, at
 *    1 ms resolution: it moves while the collector measures its update period at open.
 *  - $FAKE_NVML_ENERGY_REPLAY=<csv>: every GPU's counter replays a real recording in real time,
 *    looped: testdata/h100_energy_reads.csv (bench/gpu/nvml_record.py on an H100 80GB HBM3,
 *    driver 580.159.04, idle: the counter moves every ~100 ms by ~7.2 J). Columns phase,t0_ns,
 *    t1_ns,energy_mj,power_mw; its first phase only; a read's instant is the middle of [t0, t1]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectors/nvml/testdata/fake_nvml.h"

#define FAKE_MAX_REPLAY 4096

static unsigned long long g_replay_at[FAKE_MAX_REPLAY]; /* ns since the first read */
static unsigned long long g_replay_mj[FAKE_MAX_REPLAY];
static unsigned g_replay_n;
static unsigned long long g_init_real_ns;

static unsigned long long RealNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

void fake_energy_init(void) {
  g_init_real_ns = RealNs();
  g_replay_n = 0;
  const char* path = getenv("FAKE_NVML_ENERGY_REPLAY");
  if (!path || !*path) return;
  FILE* f = fopen(path, "r");
  if (!f) return;
  char line[256];
  unsigned long long first = 0;
  char first_phase[32] = "";
  while (fgets(line, sizeof line, f) && g_replay_n < FAKE_MAX_REPLAY) {
    char phase[32];
    unsigned long long t0, t1, mj, mw;
    if (sscanf(line, "%31[^,],%llu,%llu,%llu,%llu", phase, &t0, &t1, &mj, &mw) != 5) continue;
    if (g_replay_n == 0) snprintf(first_phase, sizeof first_phase, "%s", phase);
    if (strcmp(phase, first_phase) != 0) break; /* one phase: the idle one, read back to back */
    const unsigned long long mid = t0 + (t1 - t0) / 2;
    if (g_replay_n == 0) first = mid;
    g_replay_at[g_replay_n] = mid - first;
    g_replay_mj[g_replay_n] = mj;
    ++g_replay_n;
  }
  fclose(f);
}

/* The recording's value at t ns after its first read, looped over its span. */
static unsigned long long Replay(unsigned long long t) {
  const unsigned long long span = g_replay_at[g_replay_n - 1];
  const unsigned long long gain = g_replay_mj[g_replay_n - 1] - g_replay_mj[0];
  unsigned long long loops = 0;
  if (span > 0) {
    loops = t / span;
    t %= span;
  }
  unsigned i = 0;
  while (i + 1 < g_replay_n && g_replay_at[i + 1] <= t) ++i;
  return g_replay_mj[i] + loops * gain;
}

unsigned long long fake_energy_read(struct nvmlDevice_st* d) {
  if (g_replay_n > 1) return d->energy_mj + Replay(RealNs() - g_init_real_ns);
  if (d->energy_step_mj > 0) {
    d->energy_mj += d->energy_step_mj;
    return d->energy_mj;
  }
  const unsigned long long ms =
      g_fake_now_ns / 1000000ull + (RealNs() - g_init_real_ns) / 1000000ull;
  return d->energy_mj + ms * d->power_mw / 1000ull; /* ms x W */
}
