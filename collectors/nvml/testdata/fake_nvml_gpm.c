/* The NVML test double's GPM (NVML 11.8+, Hopper and later; other architectures answer
 * isSupportedDevice = 0). A sample holds the GPU's counters as of the last 100 ms refresh
 * before nvmlGpmSampleGet (nvml.h: "the interval between two nvmlGpmSampleGet() calls should be
 * greater than 100ms due to the internal sample refresh rate"). The counters integrate an
 * activity the test sets with fake_nvml_set_activity() over the clock it drives with
 * fake_nvml_set_time_ns(). nvmlGpmMetricsGet checks version == 1 (the raw integer) and
 * numMetrics <= 333, sets each metric's own nvmlReturn (NVML_ERROR_NOT_SUPPORTED for ids it does
 * not model) and answers NVML_ERROR_INVALID_ARGUMENT for two samples of one refresh.
 * -DFAKE_NVML_NO_GPM leaves the GPM entry points out (an R470-era driver). */
#include <stdlib.h>
#include <string.h>

#include "collectors/nvml/testdata/fake_nvml.h"

#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH_ 25

static double g_sm = 0, g_tensor = 0, g_dram = 0, g_fp32 = 0, g_pcie_mib_s = 0;

static void Step(struct nvmlDevice_st* d, unsigned long long t) {
  double dt = (double)(t - d->at_ns);
  d->sm_ns += g_sm * dt;
  d->tensor_ns += g_tensor * dt;
  d->dram_ns += g_dram * dt;
  d->fp32_ns += g_fp32 * dt;
  d->pcie_tx += g_pcie_mib_s * FAKE_MIB * dt / 1e9;
  d->pcie_rx += 0.5 * g_pcie_mib_s * FAKE_MIB * dt / 1e9;
  d->at_ns = t;
  if (t % FAKE_REFRESH_NS == 0) { /* a refresh: the counters a sample holds until the next */
    d->tick_ns = t;
    d->tick_sm = d->sm_ns;
    d->tick_tensor = d->tensor_ns;
    d->tick_dram = d->dram_ns;
    d->tick_fp32 = d->fp32_ns;
    d->tick_tx = d->pcie_tx;
    d->tick_rx = d->pcie_rx;
  }
}

void fake_gpm_integrate(unsigned long long t) {
  for (unsigned i = 0; i < g_fake_count; ++i) {
    struct nvmlDevice_st* d = &g_fake_gpus[i];
    while (d->at_ns < t) {
      unsigned long long next = (d->at_ns / FAKE_REFRESH_NS + 1) * FAKE_REFRESH_NS;
      Step(d, next < t ? next : t);
    }
  }
}

/* Test control, found with dlsym on the same handle. Activity is a fraction 0..1. */
void fake_nvml_set_activity(double sm, double tensor, double dram, double fp32, double pcie_mib_s) {
  fake_gpm_integrate(g_fake_now_ns);
  g_sm = sm;
  g_tensor = tensor;
  g_dram = dram;
  g_fp32 = fp32;
  g_pcie_mib_s = pcie_mib_s;
}

#ifndef FAKE_NVML_NO_GPM
struct nvmlGpmSample_st {
  int valid;
  unsigned device;
  unsigned long long tick_ns;
  double sm_ns, tensor_ns, dram_ns, fp32_ns, pcie_tx, pcie_rx;
};

static int GpmCapable(nvmlDevice_t d) {
  return strcmp(d->arch, "Hopper") == 0 || strcmp(d->arch, "Blackwell") == 0;
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t* s) {
  nvmlReturn_t r = fake_check(d);
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
  nvmlReturn_t r = fake_check(d);
  if (r != NVML_SUCCESS) return r;
  if (!GpmCapable(d)) return NVML_ERROR_NOT_SUPPORTED;
  fake_gpm_integrate(g_fake_now_ns);
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
static unsigned g_last_mig_gi = 0xFFFFFFFFu;
unsigned fake_nvml_last_mig_gi(void) { return g_last_mig_gi; }
nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t d, unsigned int gi, nvmlGpmSample_t s) {
  nvmlReturn_t r = fake_check(d);
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
        x->value = (b->pcie_tx - a->pcie_tx) / FAKE_MIB / (dt / 1e9);
        break;
      case NVML_GPM_METRIC_PCIE_RX_PER_SEC:
        x->value = (b->pcie_rx - a->pcie_rx) / FAKE_MIB / (dt / 1e9);
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
