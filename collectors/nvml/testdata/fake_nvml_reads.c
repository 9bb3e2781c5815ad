/* The NVML test double's per-device reads (fake_nvml.c says what they replay): identity, the
 * plain reads NvmlLibrary requires, and the compute processes. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "collectors/nvml/testdata/fake_nvml.h"

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  nvmlReturn_t r = fake_check(d);
  if (r != NVML_SUCCESS) return r;
  memset(pci, 0, sizeof *pci);
  snprintf(pci->busId, sizeof pci->busId, "%s", d->bus);
  unsigned domain = 0, bus = 0, device = 0;
  if (sscanf(d->bus, "%x:%x:%x", &domain, &bus, &device) == 3) {
    pci->domain = domain;
    pci->bus = bus;
    pci->device = device;
    pci->pciDeviceId = d->pci_device_id;
    pci->pciSubSystemId = d->pci_subsystem_id;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", domain & 0xFFFF, bus,
             device);
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int length) {
  nvmlReturn_t r = fake_check(d);
  if (r != NVML_SUCCESS) return r;
  if (length < strlen(d->uuid) + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  snprintf(uuid, length, "%s", d->uuid);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int length) {
  nvmlReturn_t r = fake_check(d);
  if (r != NVML_SUCCESS) return r;
  if (length < strlen(d->name) + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  snprintf(name, length, "%s", d->name);
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_NO_PROCESSES_V3
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  nvmlReturn_t r = fake_check(d);
  if (r != NVML_SUCCESS) return r;
  if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (*count < d->nprocs) {
    *count = d->nprocs;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < d->nprocs; ++i) {
    infos[i].pid = d->procs[i].pid;
    infos[i].usedGpuMemory = d->procs[i].bytes;
    infos[i].gpuInstanceId = d->procs[i].gi;
    infos[i].computeInstanceId = d->procs[i].ci;
  }
  *count = d->nprocs;
  return NVML_SUCCESS;
}
#endif

/* mJ since "driver load" (fake_nvml_energy.c). FAKE_NVML_LOST_AFTER / _IN_USE_AFTER count these
 * reads. */
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long* mj) {
  nvmlReturn_t r = fake_check(d);
  if (r != NVML_SUCCESS) return r;
  /* Atomic: the agent measures each GPU's energy-counter period on a thread of its own. */
  const long reads = __atomic_load_n(&g_fake_energy_reads, __ATOMIC_SEQ_CST);
  if (g_fake_lost_after >= 0 && reads >= g_fake_lost_after && d->index == 0) {
    d->lost = 1; /* fell off the bus: every later call on it fails */
    return NVML_ERROR_GPU_IS_LOST;
  }
  if (g_fake_in_use_after >= 0 && reads >= g_fake_in_use_after) return NVML_ERROR_IN_USE;
  __atomic_add_fetch(&g_fake_energy_reads, 1, __ATOMIC_SEQ_CST);
  if (g_fake_energy_read_us > 0) {
    struct timespec ts = {g_fake_energy_read_us / 1000000, (g_fake_energy_read_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
  }
  *mj = fake_energy_read(d); /* fake_nvml_energy.c */
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* mw) {
  nvmlReturn_t r = fake_check(d);
  if (r == NVML_SUCCESS) *mw = d->power_mw;
  return r;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  nvmlReturn_t r = fake_check(d);
  if (r != NVML_SUCCESS) return r;
  if (!d->util_supported) return NVML_ERROR_NOT_SUPPORTED; /* MIG enabled: N/A */
  u->gpu = u->memory = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int* mhz) {
  nvmlReturn_t r = fake_check(d);
  if (r != NVML_SUCCESS) return r;
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM:
    case NVML_CLOCK_VIDEO:
      *mhz = d->sm_mhz;
      return NVML_SUCCESS;
    case NVML_CLOCK_MEM:
      *mhz = d->mem_mhz;
      return NVML_SUCCESS;
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  nvmlReturn_t r = fake_check(d);
  if (r != NVML_SUCCESS) return r;
  unsigned long long used = d->mem_base_used;
  for (unsigned i = 0; i < d->nprocs; ++i) used += d->procs[i].bytes;
  m->total = d->mem_total;
  m->used = used;
  m->free = m->total - d->mem_reserved - used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t* values) {
  nvmlReturn_t r = fake_check(d);
  if (r != NVML_SUCCESS) return r;
  for (int i = 0; i < count; ++i) {
    if (values[i].fieldId == NVML_FI_DEV_MEMORY_TEMP && d->memory_temp_c >= 0) {
      values[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
      values[i].value.uiVal = (unsigned)d->memory_temp_c;
      values[i].nvmlReturn = NVML_SUCCESS;
    } else {
      values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  }
  return NVML_SUCCESS;
}
