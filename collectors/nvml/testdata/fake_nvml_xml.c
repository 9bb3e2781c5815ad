/* The NVML test double's node mode: GPUs and their processes read from a real
 * `nvidia-smi -q -x` document. Per <gpu>: product name and architecture, UUID, PCI bus id and
 * the <process_info> entries (types C and C+G are compute processes; G ones are not listed by
 * nvmlDeviceGetComputeRunningProcesses, as in NVML). The documents are trimmed to those
 * elements, so the plain reads (power, clocks, memory) take fixed values, set here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/nvml/testdata/fake_nvml.h"

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
  if (d->nprocs >= FAKE_MAX_PROCS) return;
  d->procs[d->nprocs++] = (struct fake_proc){pid, mib * FAKE_MIB, gi, ci};
}

/* The plain reads of a node GPU (not in the trimmed documents): 300 W (fake_nvml_energy.c),
 * idle clocks, a 97887 MiB framebuffer, utilization 0, no memory temperature. */
static void NodeDefaults(struct nvmlDevice_st* d) {
  d->energy_mj = 1000000ull;
  d->energy_step_mj = 0;
  d->power_mw = 300000;
  d->sm_mhz = 180;
  d->mem_mhz = 405;
  d->util_supported = 1;
  d->memory_temp_c = -1;
  d->mem_total = 97887ull * FAKE_MIB;
  d->mem_base_used = 0;
}

int fake_load_xml(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) return -1;
  static char xml[1 << 20];
  size_t n = fread(xml, 1, sizeof xml - 1, f);
  fclose(f);
  xml[n] = '\0';
  const char* p = xml;
  g_fake_count = 0;
  while (g_fake_count < FAKE_MAX_GPUS && (p = strstr(p, "<gpu id=")) != NULL) {
    const char* end = strstr(p, "</gpu>");
    if (!end) break;
    struct nvmlDevice_st* d = &g_fake_gpus[g_fake_count];
    memset(d, 0, sizeof *d);
    d->index = g_fake_count;
    d->at_ns = g_fake_now_ns;
    d->tick_ns = g_fake_now_ns / FAKE_REFRESH_NS * FAKE_REFRESH_NS;
    NodeDefaults(d);
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
    ++g_fake_count;
    p = end;
  }
  return 0;
}

void fake_add_procs(const char* list) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", list);
  for (char* item = strtok(buf, ";"); item; item = strtok(NULL, ";")) {
    unsigned gpu = 0, pid = 0, gi = 0xFFFFFFFFu, ci = 0xFFFFFFFFu;
    unsigned long long mib = 0;
    if (sscanf(item, "%u:%u:%llu:%u:%u", &gpu, &pid, &mib, &gi, &ci) >= 3 && gpu < g_fake_count) {
      AddProc(&g_fake_gpus[gpu], pid, mib, gi, ci);
    }
  }
}
