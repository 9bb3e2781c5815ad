/* The few NVML types and entry points the agent uses, declared here because NVML is loaded
 * with dlopen (one package serves AMD and NVIDIA nodes, and the build host needs no CUDA).
 * Layouts and values follow NVIDIA's nvml.h as documented in the NVML API Reference
 * (docs.nvidia.com/deploy/nvml-api: nvmlReturn_t, nvmlUtilization_t, nvmlMemory_t,
 * nvmlClockType_t, nvmlFieldValue_t, nvmlPciInfo_t); the ABI of these has been stable since
 * the _v2 entry points. Plain C so that the test double (testdata/fake_nvml.c) shares it.
 */
#ifndef SEQPOINT_COLLECTORS_NVML_NVML_API_H_
#define SEQPOINT_COLLECTORS_NVML_NVML_API_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nvmlDevice_st* nvmlDevice_t;

typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu;    /* percent of time a kernel ran, over the last sample period */
  unsigned int memory; /* percent of time device memory was read or written */
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
  unsigned long long total; /* bytes */
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef enum nvmlClockType_enum {
  NVML_CLOCK_GRAPHICS = 0,
  NVML_CLOCK_SM = 1,
  NVML_CLOCK_MEM = 2,
  NVML_CLOCK_VIDEO = 3
} nvmlClockType_t;

typedef enum nvmlValueType_enum {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5
} nvmlValueType_t;

typedef union nvmlValue_st {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  signed int siVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
  unsigned int fieldId; /* NVML_FI_*, set by the caller */
  unsigned int scopeId; /* e.g. an NVLink id; 0 otherwise */
  long long timestamp;  /* us since 1970 */
  long long latencyUsec;
  nvmlValueType_t valueType;
  nvmlReturn_t nvmlReturn; /* check before reading value */
  nvmlValue_t value;
} nvmlFieldValue_t;

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "00000000:01:00.0" */
} nvmlPciInfo_t;

/* Processes with a context on a GPU (nvmlProcessInfo_v2_t, what the _v3 entry point fills).
 * pid is the host pid (the driver is not pid-namespace aware); usedGpuMemory is
 * NVML_VALUE_NOT_AVAILABLE where not available (Windows WDDM, some MIG queries);
 * gpuInstanceId / computeInstanceId are 0xFFFFFFFF without MIG. */
#define NVML_VALUE_NOT_AVAILABLE (~0ull)
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory; /* bytes */
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96

/* GPM (NVML 11.8+, Hopper and later; nvml.h group "NVML GPM"). Both struct versions are the
 * raw integer 1 in every header from 11.8 to 13.3, not NVML_STRUCT_VERSION(). The metrics array
 * grew (NVML_GPM_METRIC_MAX 98 -> 210 -> 333) under the same version: NVML fills
 * metrics[0..numMetrics), so a caller's array only has to hold what it asks for. */
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;
#define NVML_GPM_METRICS_GET_VERSION 1
#define NVML_GPM_SUPPORT_VERSION 1
#define NVML_GPM_METRIC_MAX 333
typedef enum nvmlGpmMetricId_enum {
  NVML_GPM_METRIC_GRAPHICS_UTIL = 1,
  NVML_GPM_METRIC_SM_UTIL = 2,
  NVML_GPM_METRIC_SM_OCCUPANCY = 3,
  NVML_GPM_METRIC_INTEGER_UTIL = 4,
  NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
  NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6,
  NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7,
  NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9,
  NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
  NVML_GPM_METRIC_FP64_UTIL = 11,
  NVML_GPM_METRIC_FP32_UTIL = 12,
  NVML_GPM_METRIC_FP16_UTIL = 13,
  NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20,
  NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21,
  NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60,
  NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61
} nvmlGpmMetricId_t;
typedef struct {
  unsigned int metricId;   /* IN: nvmlGpmMetricId_t */
  nvmlReturn_t nvmlReturn; /* OUT: this metric's status; value valid only if NVML_SUCCESS */
  double value;            /* OUT */
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo; /* OUT */
} nvmlGpmMetric_t;
typedef struct {
  unsigned int version;    /* NVML_GPM_METRICS_GET_VERSION */
  unsigned int numMetrics; /* entries of metrics[] to fill */
  nvmlGpmSample_t sample1; /* the earlier sample */
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;
typedef struct {
  unsigned int version; /* NVML_GPM_SUPPORT_VERSION */
  unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

/* Field ids used by tests and docs (nvml.h). */
#define NVML_FI_DEV_MEMORY_TEMP 82

/* Entry points, by their exported (versioned) names. */
typedef nvmlReturn_t (*nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_fn)(unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_v3_fn)(nvmlDevice_t, nvmlPciInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetTotalEnergyConsumption_fn)(nvmlDevice_t,
                                                               unsigned long long*); /* mJ */
typedef nvmlReturn_t (*nvmlDeviceGetPowerUsage_fn)(nvmlDevice_t, unsigned int*);     /* mW */
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t, nvmlUtilization_t*);
typedef nvmlReturn_t (*nvmlDeviceGetClockInfo_fn)(nvmlDevice_t, nvmlClockType_t,
                                                  unsigned int*); /* MHz */
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t, nvmlMemory_t*);
typedef nvmlReturn_t (*nvmlDeviceGetFieldValues_fn)(nvmlDevice_t, int, nvmlFieldValue_t*);
/* Optional: a driver whose NVML lacks one loses only what needs it. */
typedef nvmlReturn_t (*nvmlDeviceGetUUID_fn)(nvmlDevice_t, char*, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetName_fn)(nvmlDevice_t, char*, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses_v3_fn)(nvmlDevice_t, unsigned int*,
                                                                   nvmlProcessInfo_t*);
typedef nvmlReturn_t (*nvmlGpmQueryDeviceSupport_fn)(nvmlDevice_t, nvmlGpmSupport_t*);
typedef nvmlReturn_t (*nvmlGpmSampleAlloc_fn)(nvmlGpmSample_t*);
typedef nvmlReturn_t (*nvmlGpmSampleFree_fn)(nvmlGpmSample_t);
typedef nvmlReturn_t (*nvmlGpmSampleGet_fn)(nvmlDevice_t, nvmlGpmSample_t);
typedef nvmlReturn_t (*nvmlGpmMigSampleGet_fn)(nvmlDevice_t, unsigned int, nvmlGpmSample_t);
typedef nvmlReturn_t (*nvmlGpmMetricsGet_fn)(nvmlGpmMetricsGet_t*);

#ifdef __cplusplus
}
#endif

#endif /* SEQPOINT_COLLECTORS_NVML_NVML_API_H_ */
