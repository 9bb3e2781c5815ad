/* Internals shared by the parts of the NVML test double (fake_nvml.c says what it replays and
 * lists its knobs): one device model, filled either from the built-in A100 recording or from a
 * real `nvidia-smi -q -x` node document. */
#ifndef SEQPOINT_COLLECTORS_NVML_TESTDATA_FAKE_NVML_H_
#define SEQPOINT_COLLECTORS_NVML_TESTDATA_FAKE_NVML_H_

#include "collectors/nvml/nvml_api.h"

#define FAKE_MAX_GPUS 8
#define FAKE_MAX_PROCS 32
#define FAKE_MIB (1024ull * 1024ull)
#define FAKE_REFRESH_NS 100000000ull /* GPM's internal refresh (nvml.h) */

struct fake_proc {
  unsigned pid;
  unsigned long long bytes;
  unsigned gi, ci; /* MIG instance ids, 0xFFFFFFFF without MIG */
};

struct nvmlDevice_st {
  unsigned index;
  char name[96], arch[32], uuid[96], bus[32];
  int lost;
  /* The plain reads. energy_step_mj > 0: energy advances by that much on every read (the A100
   * recording); 0: it follows the test's clock at power_mw. util_supported 0: utilization
   * answers NVML_ERROR_NOT_SUPPORTED (MIG). memory_temp_c < 0: that field is not supported. */
  unsigned long long energy_mj, energy_step_mj;
  unsigned power_mw, sm_mhz, mem_mhz;
  int util_supported, memory_temp_c;
  unsigned long long mem_total, mem_reserved, mem_base_used; /* used = base + the processes' */
  unsigned pci_device_id, pci_subsystem_id;
  struct fake_proc procs[FAKE_MAX_PROCS];
  unsigned nprocs;
  /* GPM model (fake_nvml_gpm.c): integrals (activity x ns) and byte counts up to at_ns. */
  double sm_ns, tensor_ns, dram_ns, fp32_ns;
  double pcie_tx, pcie_rx;
  unsigned long long at_ns;
  /* The same as of the last 100 ms refresh at or before at_ns: what a sample holds. */
  double tick_sm, tick_tensor, tick_dram, tick_fp32, tick_tx, tick_rx;
  unsigned long long tick_ns;
};

extern struct nvmlDevice_st g_fake_gpus[FAKE_MAX_GPUS];
extern unsigned g_fake_count;
extern int g_fake_refs;
extern unsigned long long g_fake_now_ns; /* the clock the test drives */
/* FAKE_NVML_LOST_AFTER / FAKE_NVML_IN_USE_AFTER (-1: never) and the energy reads so far. */
extern long g_fake_lost_after, g_fake_in_use_after, g_fake_energy_reads;
extern long g_fake_energy_read_us; /* FAKE_NVML_ENERGY_READ_US: each energy read sleeps this long */

/* NVML_SUCCESS, or why a call on d fails (uninitialised, no handle, lost). */
nvmlReturn_t fake_check(nvmlDevice_t d);
/* fake_nvml_xml.c: the node's GPUs and processes from a `nvidia-smi -q -x` document; -1 when
 * it cannot be read. fake_add_procs: "gpu:pid:MiB[:gi:ci]" items joined by ';'. */
int fake_load_xml(const char* path);
void fake_add_procs(const char* list);
/* fake_nvml_energy.c: loads $FAKE_NVML_ENERGY_REPLAY at nvmlInit; the counter's next value. */
void fake_energy_init(void);
unsigned long long fake_energy_read(struct nvmlDevice_st* d);
/* fake_nvml_gpm.c: advances every GPU's GPM counters to t. */
void fake_gpm_integrate(unsigned long long t);

#endif
