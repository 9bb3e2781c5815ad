/* A test double of libnvidia-ml.so.1, built by the tests (no NVIDIA GPU on the build hosts).
 * It exports the NVML entry points the agent resolves and answers with values recorded from a
 * real GPU: an NVIDIA A100-SXM4-80GB, driver 535.54.03, as listed by `nvidia-smi -q -x` in
 * Telegraf's public test data (plugins/inputs/nvidia_smi/testdata/a100-sxm4-v12.xml):
 *   power draw 67.03 W, SM clock 1275 MHz, memory clock 1593 MHz, FB memory total 81920 MiB,
 *   used 50 MiB, free 80999 MiB, memory temperature 44 C, utilization N/A (MIG enabled: NVML
 *   answers NVML_ERROR_NOT_SUPPORTED), PCI bus id 00000000:01:00.0.
 * nvidia-smi -q does not print the total energy counter; the double starts it at an arbitrary
 * origin (it counts "since driver load") and advances it by what 67.03 W gives in 100 ms,
 * 6703 mJ, on every read, so the expected deltas are exact.
 *
 * Environment knobs (read at nvmlInit_v2), for the error paths:
 *   FAKE_NVML_INIT_RESULT=<n>  nvmlInit_v2 returns n (e.g. 9, NVML_ERROR_DRIVER_NOT_LOADED)
 *   FAKE_NVML_DEVICES=<n>      number of GPUs (1..4, default 1), all alike but the bus id
 *   FAKE_NVML_LOST_AFTER=<n>   after n energy reads, GPU 0 answers NVML_ERROR_GPU_IS_LOST
 *   FAKE_NVML_IN_USE_AFTER=<n> after n energy reads, energy reads answer NVML_ERROR_IN_USE (a
 *                              profiler holds the device); the other reads still answer
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/nvml/nvml_api.h"

#define MIB (1024ull * 1024ull)
#define MAX_DEVICES 4

struct nvmlDevice_st {
  unsigned index;
  unsigned long long energy_mj;
  int lost;
};

static struct nvmlDevice_st g_devices[MAX_DEVICES];
static unsigned g_count = 0;
static int g_refs = 0;
static long g_lost_after = -1;
static long g_in_use_after = -1;
static long g_energy_reads = 0;

static long EnvLong(const char* name, long fallback) {
  const char* v = getenv(name);
  return (v && *v) ? strtol(v, NULL, 10) : fallback;
}

nvmlReturn_t nvmlInit_v2(void) {
  long forced = EnvLong("FAKE_NVML_INIT_RESULT", 0);
  if (forced != 0) return (nvmlReturn_t)forced;
  if (g_refs++ > 0) return NVML_SUCCESS;
  long n = EnvLong("FAKE_NVML_DEVICES", 1);
  g_count = (unsigned)(n < 0 ? 0 : n > MAX_DEVICES ? MAX_DEVICES : n);
  g_lost_after = EnvLong("FAKE_NVML_LOST_AFTER", -1);
  g_in_use_after = EnvLong("FAKE_NVML_IN_USE_AFTER", -1);
  g_energy_reads = 0;
  for (unsigned i = 0; i < MAX_DEVICES; ++i) {
    g_devices[i].index = i;
    g_devices[i].energy_mj = 1000000000ull;
    g_devices[i].lost = 0;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  if (g_refs == 0) return NVML_ERROR_UNINITIALIZED;
  --g_refs;
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
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    default:
      return "Unknown Error";
  }
}

static nvmlReturn_t Check(nvmlDevice_t d) {
  if (g_refs == 0) return NVML_ERROR_UNINITIALIZED;
  if (d == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (d->lost) return NVML_ERROR_GPU_IS_LOST;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_refs == 0) return NVML_ERROR_UNINITIALIZED;
  *count = g_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (g_refs == 0) return NVML_ERROR_UNINITIALIZED;
  if (index >= g_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_devices[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  memset(pci, 0, sizeof *pci);
  pci->bus = 1 + d->index;
  pci->pciDeviceId = 0x20B210DE;
  pci->pciSubSystemId = 0x147F10DE;
  snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long* mj) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  if (g_lost_after >= 0 && g_energy_reads >= g_lost_after && d->index == 0) {
    d->lost = 1; /* fell off the bus: every later call on it fails */
    return NVML_ERROR_GPU_IS_LOST;
  }
  if (g_in_use_after >= 0 && g_energy_reads >= g_in_use_after) return NVML_ERROR_IN_USE;
  ++g_energy_reads;
  d->energy_mj += 6703; /* 67.03 W for 100 ms */
  *mj = d->energy_mj;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* mw) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  *mw = 67030;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  nvmlReturn_t r = Check(d);
  (void)u;
  return r != NVML_SUCCESS ? r : NVML_ERROR_NOT_SUPPORTED; /* MIG enabled: N/A */
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int* mhz) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM:
    case NVML_CLOCK_VIDEO:
      *mhz = 1275;
      return NVML_SUCCESS;
    case NVML_CLOCK_MEM:
      *mhz = 1593;
      return NVML_SUCCESS;
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  m->total = 81920 * MIB;
  m->free = 80999 * MIB;
  m->used = 50 * MIB;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t* values) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  for (int i = 0; i < count; ++i) {
    if (values[i].fieldId == NVML_FI_DEV_MEMORY_TEMP) {
      values[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
      values[i].value.uiVal = 44;
      values[i].nvmlReturn = NVML_SUCCESS;
    } else {
      values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  }
  return NVML_SUCCESS;
}
