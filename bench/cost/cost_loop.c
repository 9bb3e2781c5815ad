/* The cost bench's trainer: a USDT-marked loop (sdk/include/seqpoint/usdt.h) that runs N
 * iterations of W microseconds of busy work at R iterations per second, and writes each
 * iteration's own time (from just before its begin marker to just after its end marker, so the
 * two probe hits and whatever they cause in this thread count) as one u32 of nanoseconds per
 * iteration to OUT. Paced by absolute deadlines (a late iteration does not shift the others).
 *
 *   cost_loop N R W OUT [SEQ_LENS]      SEQ_LENS: comma-separated, cycled (default 16,32,64)
 *
 * With $COST_LOOP_GATE (a FIFO) set, the loop first waits until the FIFO's writer closes it: the
 * bench opens it once every loop is attached, so all of them start together and none runs
 * before its probes are on.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "seqpoint/usdt.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void busy_until(uint64_t t) {
  while (now_ns() < t) {
  }
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: cost_loop N RATE WORK_US OUT [SEQ_LENS]\n");
    return 2;
  }
  const uint64_t n = strtoull(argv[1], NULL, 10);
  const double rate = atof(argv[2]);
  const uint64_t work_ns = strtoull(argv[3], NULL, 10) * 1000;
  uint32_t sls[64];
  int nsl = 0;
  char* spec = strdup(argc > 5 ? argv[5] : "16,32,64");
  for (char* tok = strtok(spec, ","); tok && nsl < 64; tok = strtok(NULL, ",")) sls[nsl++] = atoi(tok);
  if (n == 0 || rate <= 0 || nsl == 0) {
    fprintf(stderr, "cost_loop: N, RATE and SEQ_LENS must be positive\n");
    return 2;
  }
  uint32_t* times = calloc(n, sizeof *times);
  if (!times) return 1;
  const char* gate = getenv("COST_LOOP_GATE");
  if (gate && *gate) {
    int fd = open(gate, O_RDONLY); /* blocks until the bench opens the writing end */
    char c;
    while (fd >= 0 && read(fd, &c, 1) > 0) {
    }
    if (fd >= 0) close(fd);
  }
  const uint64_t period = (uint64_t)(1e9 / rate);
  const uint64_t start = now_ns();
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t due = start + i * period;
    uint64_t t = now_ns();
    if (t < due) {
      struct timespec ts = {(time_t)(due / 1000000000ull), (long)(due % 1000000000ull)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
    const uint32_t sl = sls[i % (uint64_t)nsl];
    const uint64_t t0 = now_ns();
    SEQPOINT_ITERATION_BEGIN(i, sl, 4, (uint64_t)sl * 4);
    /* The work starts after the begin marker: a busy wait to a deadline set before it would
     * absorb the probe's cost. */
    busy_until(now_ns() + work_ns);
    SEQPOINT_ITERATION_END(i);
    const uint64_t t1 = now_ns();
    times[i] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
  }
  FILE* f = fopen(argv[4], "wb");
  if (!f || fwrite(times, sizeof *times, n, f) != n || fclose(f) != 0) {
    perror(argv[4]);
    return 1;
  }
  printf("done %llu %.3f\n", (unsigned long long)n, (double)(now_ns() - start) / 1e9);
  return 0;
}
