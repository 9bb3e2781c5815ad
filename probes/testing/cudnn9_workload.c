/* Calls the real cuDNN 9 RNN API (libcudnn_adv.so.9) in the order PyTorch's
 * aten/src/ATen/native/cudnn/RNN.cpp does for a GRU encoder-decoder, for the cudnn9-rnn
 * zero-code preset test. No GPU is needed: the data descriptor calls run on the host and
 * succeed; cudnnRNNForward / cudnnRNNBackwardData_v8 / cudnnRNNBackwardWeights_v8 get a null
 * handle and return CUDNN_STATUS_BAD_PARAM at once, but each is entered (where the uprobes sit).
 *
 *   cudnn9_workload LIBCUDNN_ADV N SL1,SL2,... [--wait]
 *
 * Per iteration (SL = SLi, the decoder's SL + 3): for encoder then decoder, set the x and y data
 * descriptors (maxSeqLength = SL, a seqLengthArray whose longest is SL) and call cudnnRNNForward
 * with CUDNN_FWD_MODE_TRAINING; then, on another thread as PyTorch's autograd device thread
 * does, for decoder then encoder: set the descriptors, cudnnRNNBackwardData_v8, set them again,
 * cudnnRNNBackwardWeights_v8. Every third iteration is followed by an evaluation forward
 * (CUDNN_FWD_MODE_INFERENCE) at SL 997, which is no iteration's. Prints "ready PID" (with
 * --wait, then waits for a line), "calls F B" (forward / backward-weights calls that returned)
 * and "done N". */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*create_fn)(void**);
typedef int (*set_fn)(void*, int, int, int, int, int, const int*, void*);
/* cudnnRNNForward: 20 arguments (cudnn_adv.h). */
typedef int (*forward_fn)(void*, void*, int, const int32_t*, void*, const void*, void*, void*,
                          void*, const void*, void*, void*, const void*, void*, size_t, const void*,
                          size_t, void*, size_t, void*);
/* cudnnRNNBackwardData_v8: 23 arguments; cudnnRNNBackwardWeights_v8: 17. */
typedef int (*bwd_data_fn)(void*, void*, const int32_t*, void*, const void*, const void*, void*,
                           void*, void*, const void*, const void*, void*, void*, const void*,
                           const void*, void*, size_t, const void*, size_t, void*, size_t, void*);
typedef int (*bwd_weights_fn)(void*, void*, int, const int32_t*, void*, const void*, void*,
                              const void*, void*, const void*, size_t, void*, size_t, void*, size_t,
                              void*);

enum { kFloat = 0, kSeqMajorUnpacked = 0, kInference = 0, kTraining = 1, kBatch = 4 };

static set_fn set_desc;
static forward_fn forward;
static bwd_data_fn bwd_data;
static bwd_weights_fn bwd_weights;
static void *x_desc, *y_desc;
static long forwards, backwards;

static void SetDescriptors(int sl) {
  int lens[kBatch];
  float pad = 0;
  for (int b = 0; b < kBatch; ++b) lens[b] = sl - b > 0 ? sl - b : 1; /* longest = sl */
  set_desc(x_desc, kFloat, kSeqMajorUnpacked, sl, kBatch, 16, lens, &pad);
  set_desc(y_desc, kFloat, kSeqMajorUnpacked, sl, kBatch, 32, lens, &pad);
}

static void Forward(int sl, int mode) {
  SetDescriptors(sl);
  forward(NULL, NULL, mode, NULL, x_desc, NULL, y_desc, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0,
          NULL, 0, NULL, 0, NULL);
  ++forwards;
}

static void BackwardOne(int sl) {
  SetDescriptors(sl);
  bwd_data(NULL, NULL, NULL, y_desc, NULL, NULL, x_desc, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, 0, NULL, 0, NULL, 0, NULL);
  SetDescriptors(sl);
  bwd_weights(NULL, NULL, 0 /* CUDNN_WGRAD_MODE_ADD */, NULL, x_desc, NULL, NULL, NULL, y_desc,
              NULL, 0, NULL, 0, NULL, 0, NULL);
  ++backwards;
}

static void* Backward(void* arg) {
  int sl = *(int*)arg;
  BackwardOne(sl + 3); /* decoder first, as autograd unwinds */
  BackwardOne(sl);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: cudnn9_workload LIBCUDNN_ADV N SL1,SL2,... [--wait]\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (lib == NULL) {
    fprintf(stderr, "cudnn9_workload: %s\n", dlerror());
    return 3;
  }
  create_fn create = (create_fn)dlsym(lib, "cudnnCreateRNNDataDescriptor");
  set_desc = (set_fn)dlsym(lib, "cudnnSetRNNDataDescriptor");
  forward = (forward_fn)dlsym(lib, "cudnnRNNForward");
  bwd_data = (bwd_data_fn)dlsym(lib, "cudnnRNNBackwardData_v8");
  bwd_weights = (bwd_weights_fn)dlsym(lib, "cudnnRNNBackwardWeights_v8");
  if (!create || !set_desc || !forward || !bwd_data || !bwd_weights) {
    fprintf(stderr, "cudnn9_workload: %s lacks a cuDNN 9 RNN symbol\n", argv[1]);
    return 3;
  }
  if (create(&x_desc) != 0 || create(&y_desc) != 0) {
    fprintf(stderr, "cudnn9_workload: cudnnCreateRNNDataDescriptor failed\n");
    return 3;
  }
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
  for (long i = 0; i < n; ++i) {
    int sl = sls[i % count];
    Forward(sl, kTraining);     /* encoder */
    Forward(sl + 3, kTraining); /* decoder */
    pthread_t t;
    if (pthread_create(&t, NULL, Backward, &sl) != 0) return 4;
    pthread_join(t, NULL);
    if (i % 3 == 2) Forward(997, kInference); /* evaluation: no iteration's */
  }
  printf("calls %ld %ld\n", forwards, backwards);
  printf("done %ld\n", n);
  fflush(stdout);
  return 0;
}
