/* Drives libseqpoint_mimic_rnn.so like a training loop, for the zero-code probe tests:
 *   mimic_workload PATTERN N SL1,SL2,... [--wait]
 * PATTERN: rnn  (forward twice per iteration, encoder SL and decoder SL+3; backward; step),
 *          gemm (three sgemm_ calls per iteration with n = SL*4, SL*4*2, 7; step),
 *          wide (mimicWideCall with the SL as its 8th argument; step).
 * With --wait it prints "ready <pid>" and waits for a line on stdin; prints "done N" at the
 * end. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mimicRNNForwardTraining(void* handle, void* desc, int sequenceLen, const void* x, void* y);
int mimicRNNBackwardWeights(void* handle, void* desc, int sequenceLen);
void mimic_sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k);
long mimicWideCall(long a0, long a1, long a2, long a3, long a4, long a5, long a6, long sl);
void mimicOptimizerStep(void);

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: mimic_workload rnn|gemm|wide N SL1,SL2,... [--wait]\n");
    return 2;
  }
  const char* pattern = argv[1];
  long n = atol(argv[2]);
  int sls[256];
  int count = 0;
  char* list = strdup(argv[3]);
  for (char* tok = strtok(list, ","); tok && count < 256; tok = strtok(NULL, ",")) {
    sls[count++] = atoi(tok);
  }
  free(list);
  if (count == 0) return 2;
  if (argc > 4 && strcmp(argv[4], "--wait") == 0) {
    char line[64];
    printf("ready %d\n", getpid());
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin)) return 1;
  }
  int handle = 0, desc = 0;
  for (long i = 0; i < n; ++i) {
    int sl = sls[i % count];
    if (strcmp(pattern, "rnn") == 0) {
      mimicRNNForwardTraining(&handle, &desc, sl, NULL, NULL);
      mimicRNNForwardTraining(&handle, &desc, sl + 3, NULL, NULL);
      mimicRNNBackwardWeights(&handle, &desc, sl + 3);
      mimicRNNBackwardWeights(&handle, &desc, sl);
    } else if (strcmp(pattern, "gemm") == 0) {
      int m = 64, k = 32, a = sl * 4, b = sl * 8, c = 7;
      mimic_sgemm_("T", "N", &m, &a, &k);
      mimic_sgemm_("T", "N", &m, &b, &k);
      mimic_sgemm_("N", "N", &m, &c, &k);
    } else {
      mimicWideCall(1, 2, 3, 4, 5, 6, 7, sl);
    }
    mimicOptimizerStep();
  }
  printf("done %ld\n", n);
  fflush(stdout);
  return 0;
}
