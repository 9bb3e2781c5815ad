/* A training process for the profiler back-off tests (agent/runs/profiler_backoff_test.cpp):
 * prints "ready <pid>", then obeys one command per line on stdin, answering each with the
 * CLOCK_MONOTONIC time it took effect, so the test can time the agent's reaction:
 *   "load PATH"  dlopen PATH (a mimic library under a profiler's file name) -> "loaded <ns>"
 *   "unload"     dlclose it (its mappings go)                                 -> "unloaded <ns>"
 *   "exit"       end. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(void) {
  char line[4096];
  void* lib = NULL;
  printf("ready %d\n", getpid());
  fflush(stdout);
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = 0;
    if (strncmp(line, "load ", 5) == 0) {
      lib = dlopen(line + 5, RTLD_NOW | RTLD_LOCAL);
      if (!lib) {
        printf("error %s\n", dlerror());
      } else {
        printf("loaded %lld\n", now_ns());
      }
    } else if (strcmp(line, "unload") == 0) {
      if (lib) dlclose(lib);
      lib = NULL;
      printf("unloaded %lld\n", now_ns());
    } else if (strcmp(line, "exit") == 0) {
      return 0;
    }
    fflush(stdout);
  }
  return 0;
}
