/* A test double of libnvidia-ml.so.1 for a multi-GPU node, built by the tests (no NVIDIA GPU on
 * the build hosts). Its GPUs and their processes are read, at nvmlInit_v2, from a real
 * `nvidia-smi -q -x` document ($FAKE_NVML_XML, e.g. node5.nvidia-smi.xml): per <gpu>, the
 * product name and architecture, UUID, PCI bus id, MIG devices and <process_info> entries
 * (those of type C or C+G are compute processes; G ones are not listed by
 * nvmlDeviceGetComputeRunningProcesses, as in NVML). Layouts follow nvml.h through
 * collectors/nvml/nvml_api.h.
 *
 * Knobs (environment, read at nvmlInit_v2):
 *   FAKE_NVML_XML=<path>        the node (required)
 *   FAKE_NVML_EXTRA=<list>      more compute processes, "gpu:pid:MiB[:gi:ci]" joined by ';'
 *                               (a process on two GPUs, one in a MIG instance)
 *   FAKE_NVML_LOST=<index>      that GPU answers NVML_ERROR_GPU_IS_LOST to every call
 *                               (mid-run: fake_nvml_set_lost(index, 1))
 *   FAKE_NVML_HOPPER=<index>    that GPU reads as a Hopper (GPM under the fixture's MIG layout)
 * GPM (NVML 11.8+, Hopper and later: the Blackwell GPU of the fixture; the others answer
 * isSupportedDevice = 0): a sample holds the GPU's counters as of the last 100 ms refresh
 * before nvmlGpmSampleGet (nvml.h: "the interval between two nvmlGpmSampleGet() calls should
 * be greater than 100ms due to the internal sample refresh rate"). The counters integrate an
 * activity the test sets with fake_nvml_set_activity() over a clock the test drives with
 * fake_nvml_set_time_ns(). nvmlGpmMetricsGet checks version == 1 (the raw integer) and
 * numMetrics <= 333, sets each metric's own nvmlReturn (NVML_ERROR_NOT_SUPPORTED for ids it does
 * not model) and answers NVML_ERROR_INVALID_ARGUMENT for two samples of one refresh.
 * Built twice more: -DFAKE_NVML_NO_GPM (an R470-era driver without the GPM entry points) and
 * -DFAKE_NVML_NO_PROCESSES_V3 (without nvmlDeviceGetComputeRunningProcesses_v3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/nvml/nvml_api.h"

#define MAX_GPUS 8
#define MAX_PROCS 32
#define MIB (1024ull * 1024ull)
#define REFRESH_NS 100000000ull
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH_ 25

struct proc {
  unsigned pid;
  unsigned long long bytes;
  unsigned gi, ci;
};

struct nvmlDevice_st {
  unsigned index;
  char name[96], arch[32], uuid[96], bus[32];
  int lost;
  struct proc procs[MAX_PROCS];
  unsigned nprocs;
  /* GPM model: integrals (activity x ns) and byte counts up to `at_ns`. */
  double sm_ns, tensor_ns, dram_ns, fp32_ns;
  double pcie_tx, pcie_rx;
  unsigned long long at_ns;
  /* The same as of the last 100 ms refresh at or before at_ns: what a sample holds. */
  double tick_sm, tick_tensor, tick_dram, tick_fp32, tick_tx, tick_rx;
  unsigned long long tick_ns;
};

struct nvmlGpmSample_st {
  int valid;
  unsigned device;
  unsigned long long tick_ns;
  double sm_ns, tensor_ns, dram_ns, fp32_ns, pcie_tx, pcie_rx;
};

static struct nvmlDevice_st g_gpus[MAX_GPUS];
static unsigned g_count;
static int g_refs;
static unsigned long long g_now_ns = 1000000000ull;
static double g_sm = 0, g_tensor = 0, g_dram = 0, g_fp32 = 0, g_pcie_mib_s = 0;

static void Step(struct nvmlDevice_st* d, unsigned long long t) {
  double dt = (double)(t - d->at_ns);
  d->sm_ns += g_sm * dt;
  d->tensor_ns += g_tensor * dt;
  d->dram_ns += g_dram * dt;
  d->fp32_ns += g_fp32 * dt;
  d->pcie_tx += g_pcie_mib_s * MIB * dt / 1e9;
  d->pcie_rx += 0.5 * g_pcie_mib_s * MIB * dt / 1e9;
  d->at_ns = t;
  if (t % REFRESH_NS == 0) { /* a refresh: the counters a sample will hold until the next */
    d->tick_ns = t;
    d->tick_sm = d->sm_ns;
    d->tick_tensor = d->tensor_ns;
    d->tick_dram = d->dram_ns;
    d->tick_fp32 = d->fp32_ns;
    d->tick_tx = d->pcie_tx;
    d->tick_rx = d->pcie_rx;
  }
}

/* Advances every GPU's counters to `t` at the current activity, refresh by refresh. */
static void Integrate(unsigned long long t) {
  for (unsigned i = 0; i < g_count; ++i) {
    struct nvmlDevice_st* d = &g_gpus[i];
    while (d->at_ns < t) {
      unsigned long long next = (d->at_ns / REFRESH_NS + 1) * REFRESH_NS;
      Step(d, next < t ? next : t);
    }
  }
}

/* Test controls, found with dlsym on the same handle. Activity is a fraction 0..1. */
void fake_nvml_set_time_ns(unsigned long long t) {
  Integrate(t);
  g_now_ns = t;
}
/* A GPU falls off the bus (lost = 1) or comes back, mid-run: every later call on it answers
 * NVML_ERROR_GPU_IS_LOST. */
void fake_nvml_set_lost(unsigned index, int lost) {
  if (index < g_count) g_gpus[index].lost = lost;
}
void fake_nvml_set_activity(double sm, double tensor, double dram, double fp32, double pcie_mib_s) {
  Integrate(g_now_ns);
  g_sm = sm;
  g_tensor = tensor;
  g_dram = dram;
  g_fp32 = fp32;
  g_pcie_mib_s = pcie_mib_s;
}

/* The text between <tag> and </tag> after `from` (within `end`), copied into out. */
static const char* Tag(const char* from, const char* end, const char* tag, char* out, size_t n) {
  char open[64], close[64];
  snprintf(open, sizeof open, "<%s>", tag);
  snprintf(close, sizeof close, "</%s>", tag);
  const char* a = strstr(from, open);
  if (!a || a >= end) return NULL;
  a += strlen(open);
  const char* b = strstr(a, close);
  if (!b || b > end) return NULL;
  size_t len = (size_t)(b - a) < n - 1 ? (size_t)(b - a) : n - 1;
  memcpy(out, a, len);
  out[len] = '\0';
  return b + strlen(close);
}

static unsigned Id(const char* s) {
  return strcmp(s, "N/A") == 0 ? 0xFFFFFFFFu : (unsigned)atoi(s);
}

static void AddProc(struct nvmlDevice_st* d, unsigned pid, unsigned long long mib, unsigned gi,
                    unsigned ci) {
  if (d->nprocs >= MAX_PROCS) return;
  d->procs[d->nprocs++] = (struct proc){pid, mib * MIB, gi, ci};
}

static int Load(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) return -1;
  static char xml[1 << 20];
  size_t n = fread(xml, 1, sizeof xml - 1, f);
  fclose(f);
  xml[n] = '\0';
  const char* p = xml;
  g_count = 0;
  while (g_count < MAX_GPUS && (p = strstr(p, "<gpu id=")) != NULL) {
    const char* end = strstr(p, "</gpu>");
    if (!end) break;
    struct nvmlDevice_st* d = &g_gpus[g_count];
    memset(d, 0, sizeof *d);
    d->index = g_count;
    d->at_ns = g_now_ns;
    d->tick_ns = g_now_ns / REFRESH_NS * REFRESH_NS;
    Tag(p, end, "product_name", d->name, sizeof d->name);
    Tag(p, end, "product_architecture", d->arch, sizeof d->arch);
    Tag(p, end, "uuid", d->uuid, sizeof d->uuid);
    Tag(p, end, "pci_bus_id", d->bus, sizeof d->bus);
    const char* q = p;
    char block[2048];
    while ((q = Tag(q, end, "process_info", block, sizeof block)) != NULL) {
      char type[16] = "", pid[32] = "", mem[64] = "", gi[16] = "N/A", ci[16] = "N/A";
      const char* bend = block + strlen(block);
      Tag(block, bend, "type", type, sizeof type);
      Tag(block, bend, "pid", pid, sizeof pid);
      Tag(block, bend, "used_memory", mem, sizeof mem);
      Tag(block, bend, "gpu_instance_id", gi, sizeof gi);
      Tag(block, bend, "compute_instance_id", ci, sizeof ci);
      if (strchr(type, 'C') != NULL)
        AddProc(d, (unsigned)atoi(pid), strtoull(mem, NULL, 10), Id(gi), Id(ci));
    }
    ++g_count;
    p = end;
  }
  return 0;
}

static void LoadExtra(const char* list) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", list);
  for (char* item = strtok(buf, ";"); item; item = strtok(NULL, ";")) {
    unsigned gpu = 0, pid = 0, gi = 0xFFFFFFFFu, ci = 0xFFFFFFFFu;
    unsigned long long mib = 0;
    if (sscanf(item, "%u:%u:%llu:%u:%u", &gpu, &pid, &mib, &gi, &ci) >= 3 && gpu < g_count) {
      AddProc(&g_gpus[gpu], pid, mib, gi, ci);
    }
  }
}

nvmlReturn_t nvmlInit_v2(void) {
  if (g_refs++ > 0) return NVML_SUCCESS;
  const char* xml = getenv("FAKE_NVML_XML");
  if (!xml || Load(xml) != 0) {
    g_refs = 0;
    return NVML_ERROR_DRIVER_NOT_LOADED;
  }
  const char* extra = getenv("FAKE_NVML_EXTRA");
  if (extra) LoadExtra(extra);
  /* FAKE_NVML_HOPPER=<index>: that GPU's architecture reads Hopper (an H100 in the fixture
   * GPU's MIG layout), so GPM under MIG can be tested on a real MIG layout. */
  const char* hopper = getenv("FAKE_NVML_HOPPER");
  if (hopper && *hopper && (unsigned)atoi(hopper) < g_count) {
    snprintf(g_gpus[atoi(hopper)].arch, sizeof g_gpus[0].arch, "%s", "Hopper");
  }
  const char* lost = getenv("FAKE_NVML_LOST");
  if (lost && *lost && (unsigned)atoi(lost) < g_count) g_gpus[atoi(lost)].lost = 1;
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
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_NO_DATA:
      return "No data";
    default:
      return "Unknown Error";
  }
}

static nvmlReturn_t Check(nvmlDevice_t d) {
  if (g_refs == 0) return NVML_ERROR_UNINITIALIZED;
  if (d == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  return d->lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_refs == 0) return NVML_ERROR_UNINITIALIZED;
  *count = g_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (g_refs == 0) return NVML_ERROR_UNINITIALIZED;
  if (index >= g_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_gpus[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  memset(pci, 0, sizeof *pci);
  snprintf(pci->busId, sizeof pci->busId, "%s", d->bus);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int length) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  if (length < strlen(d->uuid) + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  snprintf(uuid, length, "%s", d->uuid);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int length) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  if (length < strlen(d->name) + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  snprintf(name, length, "%s", d->name);
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_NO_PROCESSES_V3
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  nvmlReturn_t r = Check(d);
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

/* The basic reads NvmlLibrary requires; plain values (this double is about mapping and GPM). */
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long* mj) {
  nvmlReturn_t r = Check(d);
  if (r == NVML_SUCCESS) *mj = 1000000ull + g_now_ns / 1000000ull * 300ull / 1000ull;
  return r;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* mw) {
  nvmlReturn_t r = Check(d);
  if (r == NVML_SUCCESS) *mw = 300000;
  return r;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  nvmlReturn_t r = Check(d);
  if (r == NVML_SUCCESS) u->gpu = u->memory = 0;
  return r;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t t, unsigned int* mhz) {
  nvmlReturn_t r = Check(d);
  if (r == NVML_SUCCESS) *mhz = t == NVML_CLOCK_MEM ? 405 : 180;
  return r;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  unsigned long long used = 0;
  for (unsigned i = 0; i < d->nprocs; ++i) used += d->procs[i].bytes;
  m->total = 97887ull * MIB;
  m->used = used;
  m->free = m->total - used;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t* values) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  for (int i = 0; i < count; ++i) values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_NO_GPM
static int GpmCapable(nvmlDevice_t d) {
  return strcmp(d->arch, "Hopper") == 0 || strcmp(d->arch, "Blackwell") == 0;
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t* s) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  if (s == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (s->version != NVML_GPM_SUPPORT_VERSION)
    return (nvmlReturn_t)NVML_ERROR_ARGUMENT_VERSION_MISMATCH_;
  s->isSupportedDevice = (unsigned)GpmCapable(d);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* s) {
  if (s == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *s = calloc(1, sizeof(struct nvmlGpmSample_st));
  return *s ? NVML_SUCCESS : NVML_ERROR_MEMORY;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s) {
  free(s);
  return NVML_SUCCESS;
}

static nvmlReturn_t Snapshot(nvmlDevice_t d, nvmlGpmSample_t s) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  if (!GpmCapable(d)) return NVML_ERROR_NOT_SUPPORTED;
  Integrate(g_now_ns);
  /* The counters as of the last refresh, not of now. */
  s->valid = 1;
  s->device = d->index;
  s->tick_ns = d->tick_ns;
  s->sm_ns = d->tick_sm;
  s->tensor_ns = d->tick_tensor;
  s->dram_ns = d->tick_dram;
  s->fp32_ns = d->tick_fp32;
  s->pcie_tx = d->tick_tx;
  s->pcie_rx = d->tick_rx;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, nvmlGpmSample_t s) { return Snapshot(d, s); }

/* One MIG GPU instance: NVML_ERROR_NO_DATA when it has no compute instance (DCGM's
 * DcgmGpmManager: "returns NO_DATA if the GPU-I has no compute instance"), which here means no
 * compute process of the GPU lists that GPU instance with a compute instance. The counters are
 * the GPU's (instances are not modelled further). g_last_mig_gi: the last instance asked for. */
unsigned g_last_mig_gi = 0xFFFFFFFFu;
unsigned fake_nvml_last_mig_gi(void) { return g_last_mig_gi; }
nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t d, unsigned int gi, nvmlGpmSample_t s) {
  nvmlReturn_t r = Check(d);
  if (r != NVML_SUCCESS) return r;
  g_last_mig_gi = gi;
  int has_ci = 0;
  for (unsigned i = 0; i < d->nprocs; ++i) {
    has_ci |= d->procs[i].gi == gi && d->procs[i].ci != 0xFFFFFFFFu;
  }
  if (!has_ci) return NVML_ERROR_NO_DATA;
  return Snapshot(d, s);
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* m) {
  if (m == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (m->version != NVML_GPM_METRICS_GET_VERSION)
    return (nvmlReturn_t)NVML_ERROR_ARGUMENT_VERSION_MISMATCH_;
  if (m->numMetrics > NVML_GPM_METRIC_MAX) return NVML_ERROR_INVALID_ARGUMENT;
  struct nvmlGpmSample_st *a = m->sample1, *b = m->sample2;
  if (!a || !b || !a->valid || !b->valid || a->device != b->device)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (b->tick_ns <= a->tick_ns) return NVML_ERROR_INVALID_ARGUMENT; /* one refresh: no interval */
  double dt = (double)(b->tick_ns - a->tick_ns);
  for (unsigned i = 0; i < m->numMetrics; ++i) {
    nvmlGpmMetric_t* x = &m->metrics[i];
    x->nvmlReturn = NVML_SUCCESS;
    switch (x->metricId) {
      case NVML_GPM_METRIC_SM_UTIL:
        x->value = 100.0 * (b->sm_ns - a->sm_ns) / dt;
        break;
      case NVML_GPM_METRIC_ANY_TENSOR_UTIL:
        x->value = 100.0 * (b->tensor_ns - a->tensor_ns) / dt;
        break;
      case NVML_GPM_METRIC_DRAM_BW_UTIL:
        x->value = 100.0 * (b->dram_ns - a->dram_ns) / dt;
        break;
      case NVML_GPM_METRIC_FP32_UTIL:
        x->value = 100.0 * (b->fp32_ns - a->fp32_ns) / dt;
        break;
      case NVML_GPM_METRIC_PCIE_TX_PER_SEC:
        x->value = (b->pcie_tx - a->pcie_tx) / MIB / (dt / 1e9);
        break;
      case NVML_GPM_METRIC_PCIE_RX_PER_SEC:
        x->value = (b->pcie_rx - a->pcie_rx) / MIB / (dt / 1e9);
        break;
      default:
        x->value = 0;
        x->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        break;
    }
  }
  return NVML_SUCCESS;
}
#endif
