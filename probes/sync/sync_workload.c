/* A real process calling the real CUDA runtime's synchronising functions, for the sync probe
 * test (sync_probes_test.cpp). No GPU is needed: without a driver each call is entered (where
 * the probes sit) and returns an error at once.
 *
 *   sync_workload LIBCUDART
 *
 * Prints "ready PID" and waits for a line (the runtime not loaded yet); dlopens LIBCUDART,
 * prints "loaded"; then runs commands, one a line, until "exit" or end of input:
 *   burst  cudaStreamSynchronize(0) x3, cudaMemcpy host-to-device x2 (not a sync), cudaMemcpy
 *          device-to-host x2, cudaEventSynchronize(0), and last cudaDeviceSynchronize()
 *          between two CLOCK_MONOTONIC stamps; prints "last T0 T1 rc RC" (ns), "done 7" (syncs)
 *   sync   one cudaStreamSynchronize(0) between two stamps: "synced T0 T1"
 *   now    prints "now T" (CLOCK_MONOTONIC ns) */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*stream_sync_fn)(void*);
typedef int (*device_sync_fn)(void);
typedef int (*memcpy_fn)(void*, const void*, size_t, int);

enum { kHostToDevice = 1, kDeviceToHost = 2 };

static long long Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void WaitLine(void) {
  char line[64];
  if (!fgets(line, sizeof line, stdin)) exit(0);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: sync_workload LIBCUDART\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("ready %d\n", (int)getpid());
  WaitLine();
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "sync_workload: %s\n", dlerror());
    return 1;
  }
  stream_sync_fn stream_sync = (stream_sync_fn)dlsym(lib, "cudaStreamSynchronize");
  stream_sync_fn event_sync = (stream_sync_fn)dlsym(lib, "cudaEventSynchronize");
  device_sync_fn device_sync = (device_sync_fn)dlsym(lib, "cudaDeviceSynchronize");
  memcpy_fn copy = (memcpy_fn)dlsym(lib, "cudaMemcpy");
  if (!stream_sync || !event_sync || !device_sync || !copy) {
    fprintf(stderr, "sync_workload: %s lacks a CUDA sync function\n", argv[1]);
    return 1;
  }
  printf("loaded\n");
  char host[16], device[16], command[64];
  memset(host, 0, sizeof host);
  while (fgets(command, sizeof command, stdin)) {
    if (strncmp(command, "burst", 5) == 0) {
      for (int i = 0; i < 3; ++i) stream_sync(NULL);
      for (int i = 0; i < 2; ++i) copy(device, host, sizeof host, kHostToDevice);
      for (int i = 0; i < 2; ++i) copy(host, device, sizeof host, kDeviceToHost);
      event_sync(NULL);
      long long t0 = Now();
      int rc = device_sync();
      long long t1 = Now();
      printf("last %lld %lld rc %d\n", t0, t1, rc);
      printf("done 7\n");
    } else if (strncmp(command, "sync", 4) == 0) {
      long long t0 = Now();
      stream_sync(NULL);
      long long t1 = Now();
      printf("synced %lld %lld\n", t0, t1);
    } else if (strncmp(command, "now", 3) == 0) {
      printf("now %lld\n", Now());
    } else {
      break;
    }
  }
  return 0;
}
