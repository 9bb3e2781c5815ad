/* The one test double of libnvidia-ml.so.1, built by the tests (no NVIDIA GPU on the build
 * hosts). It exports the NVML entry points the agent resolves, with nvml.h's layouts (through
 * collectors/nvml/nvml_api.h), and answers with values recorded from real GPUs, in one of two
 * modes chosen at the first nvmlInit_v2:
 *
 * A100 (no $FAKE_NVML_XML): an NVIDIA A100-SXM4-80GB, driver 535.54.03, as listed by
 *   `nvidia-smi -q -x` in Telegraf's public test data (plugins/inputs/nvidia_smi/testdata/
 *   a100-sxm4-v12.xml): UUID GPU-513536b6-7d19-9063-b049-1e69664bb298, Ampere (no GPM), PCI
 *   bus id 00000000:01:00.0 (device 20B210DE, subsystem 147F10DE), power draw 67.03 W, SM clock
 *   1275 MHz, memory clock 1593 MHz, FB memory total 81920 MiB, reserved 869 MiB, used 50 MiB,
 *   free 80999 MiB, memory temperature 44 C, utilization N/A (MIG enabled: NVML answers
 *   NVML_ERROR_NOT_SUPPORTED), no processes.
 *   nvidia-smi -q does not print the total energy counter; the double starts it at an
 *   arbitrary origin (it counts "since driver load") and advances it by what 67.03 W gives in
 *   100 ms, 6703 mJ, on every read, so the expected deltas are exact (and the counter's update
 *   period, measured at open, is one read). With FAKE_NVML_DEVICES=n
 *   the node has n such GPUs, alike but for the bus (0N) and the UUID's last two hex digits.
 *
 * Node ($FAKE_NVML_XML=<path>, e.g. collectors/gpu/testdata/node5.nvidia-smi.xml): the GPUs and
 *   compute processes of a real multi-GPU `nvidia-smi -q -x` document (fake_nvml_xml.c), and
 *   GPM on the Hopper and Blackwell ones with its 100 ms refresh (fake_nvml_gpm.c).
 *
 * Knobs (environment, read at the first nvmlInit_v2; every one works in both modes):
 *   FAKE_NVML_INIT_RESULT=<n>  nvmlInit_v2 returns n (e.g. 9, NVML_ERROR_DRIVER_NOT_LOADED)
 *   FAKE_NVML_DEVICES=<n>      A100 mode: number of GPUs (1..8, default 1)
 *   FAKE_NVML_EXTRA=<list>     more compute processes, "gpu:pid:MiB[:gi:ci]" joined by ';'
 *                              (a process on two GPUs, one in a MIG instance)
 *   FAKE_NVML_LOST=<index>     that GPU answers NVML_ERROR_GPU_IS_LOST to every call
 *   FAKE_NVML_LOST_AFTER=<n>   after n energy reads, GPU 0 answers NVML_ERROR_GPU_IS_LOST
 *   FAKE_NVML_IN_USE_AFTER=<n> after n energy reads, energy reads answer NVML_ERROR_IN_USE (a
 *                              profiler holds the device); the other reads still answer
 *   FAKE_NVML_HOPPER=<index>   that GPU reads as a Hopper (GPM under the fixture's MIG layout)
 *   FAKE_NVML_ENERGY_REPLAY=<csv> every GPU's energy counter replays a real recording in real
 *                              time (fake_nvml_energy.c: the H100's 100 ms update steps)
 *   FAKE_NVML_ENERGY_READ_US=<n> every energy read sleeps n us first (an H100's took 2.4-64 ms)
 * Test controls (dlsym on the same handle): fake_nvml_set_time_ns(t), fake_nvml_set_lost(i, 0|1)
 * (a GPU falls off the bus mid-run, or comes back), fake_nvml_set_activity(...) and
 * fake_nvml_last_mig_gi() (fake_nvml_gpm.c). The per-device reads are in fake_nvml_reads.c.
 * Built once more with -DFAKE_NVML_NO_GPM -DFAKE_NVML_NO_PROCESSES_V3: a driver that lacks the
 * GPM and nvmlDeviceGetComputeRunningProcesses_v3 entry points. */
#include "collectors/nvml/testdata/fake_nvml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nvmlDevice_st g_fake_gpus[FAKE_MAX_GPUS];
unsigned g_fake_count;
int g_fake_refs;
unsigned long long g_fake_now_ns = 1000000000ull;

long g_fake_lost_after = -1;
long g_fake_in_use_after = -1;
long g_fake_energy_reads = 0;
long g_fake_energy_read_us = 0;

static long EnvLong(const char* name, long fallback) {
  const char* v = getenv(name);
  return (v && *v) ? strtol(v, NULL, 10) : fallback;
}

/* The recorded A100 (see the header), the i-th copy of it. */
static void LoadA100(long n) {
  g_fake_count = (unsigned)(n < 0 ? 0 : n > FAKE_MAX_GPUS ? FAKE_MAX_GPUS : n);
  for (unsigned i = 0; i < g_fake_count; ++i) {
    struct nvmlDevice_st* d = &g_fake_gpus[i];
    memset(d, 0, sizeof *d);
    d->index = i;
    snprintf(d->name, sizeof d->name, "NVIDIA A100-SXM4-80GB");
    snprintf(d->arch, sizeof d->arch, "Ampere");
    snprintf(d->uuid, sizeof d->uuid, "GPU-513536b6-7d19-9063-b049-1e69664bb2%02x",
             i == 0 ? 0x98 : i);
    snprintf(d->bus, sizeof d->bus, "00000000:%02X:00.0", 1 + i);
    d->energy_mj = 1000000000ull;
    d->energy_step_mj = 6703; /* 67.03 W for 100 ms */
    d->power_mw = 67030;
    d->sm_mhz = 1275;
    d->mem_mhz = 1593;
    d->util_supported = 0;
    d->memory_temp_c = 44;
    d->mem_total = 81920 * FAKE_MIB;
    d->mem_reserved = 869 * FAKE_MIB;
    d->mem_base_used = 50 * FAKE_MIB;
    d->pci_device_id = 0x20B210DE;
    d->pci_subsystem_id = 0x147F10DE;
    d->at_ns = g_fake_now_ns;
    d->tick_ns = g_fake_now_ns / FAKE_REFRESH_NS * FAKE_REFRESH_NS;
  }
}

nvmlReturn_t nvmlInit_v2(void) {
  long forced = EnvLong("FAKE_NVML_INIT_RESULT", 0);
  if (forced != 0) return (nvmlReturn_t)forced;
  if (g_fake_refs++ > 0) return NVML_SUCCESS;
  const char* xml = getenv("FAKE_NVML_XML");
  if (xml && *xml) {
    if (fake_load_xml(xml) != 0) {
      g_fake_refs = 0;
      return NVML_ERROR_DRIVER_NOT_LOADED;
    }
  } else {
    LoadA100(EnvLong("FAKE_NVML_DEVICES", 1));
  }
  const char* extra = getenv("FAKE_NVML_EXTRA");
  if (extra) fake_add_procs(extra);
  long hopper = EnvLong("FAKE_NVML_HOPPER", -1);
  if (hopper >= 0 && (unsigned long)hopper < g_fake_count) {
    snprintf(g_fake_gpus[hopper].arch, sizeof g_fake_gpus[0].arch, "%s", "Hopper");
  }
  long lost = EnvLong("FAKE_NVML_LOST", -1);
  if (lost >= 0 && (unsigned long)lost < g_fake_count) g_fake_gpus[lost].lost = 1;
  g_fake_lost_after = EnvLong("FAKE_NVML_LOST_AFTER", -1);
  g_fake_in_use_after = EnvLong("FAKE_NVML_IN_USE_AFTER", -1);
  g_fake_energy_reads = 0;
  g_fake_energy_read_us = EnvLong("FAKE_NVML_ENERGY_READ_US", 0);
  fake_energy_init();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  if (g_fake_refs == 0) return NVML_ERROR_UNINITIALIZED;
  --g_fake_refs;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_NO_DATA:
      return "No data";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t fake_check(nvmlDevice_t d) {
  if (g_fake_refs == 0) return NVML_ERROR_UNINITIALIZED;
  if (d == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  return d->lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

/* Test controls, found with dlsym on the same handle. */
void fake_nvml_set_time_ns(unsigned long long t) {
  fake_gpm_integrate(t);
  g_fake_now_ns = t;
}
void fake_nvml_set_lost(unsigned index, int lost) {
  if (index < g_fake_count) g_fake_gpus[index].lost = lost;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_fake_refs == 0) return NVML_ERROR_UNINITIALIZED;
  *count = g_fake_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (g_fake_refs == 0) return NVML_ERROR_UNINITIALIZED;
  if (index >= g_fake_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_fake_gpus[index];
  return NVML_SUCCESS;
}
