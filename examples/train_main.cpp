// `seqpoint-train`: trains a real English->German sequence model (GRU with attention, or a
// transformer) with libtorch on the CPU and writes one trace row per iteration
// (docs/trace-csv.md):
//
//   iter, seq_len, batch, tokens, epoch, time_ns, task_clock_ns, page_faults, context_switches,
//   cpu_ns
//
// seq_len = padded source length of the batch; batch = sentences; tokens = real source +
// target words (no padding, no begin/end markers); time_ns = steady_clock wall time of the
// whole iteration (id tensors, forward, backward, clipping, Adam step; the padded batch is
// built before, as a prefetching data loader would); the perf columns are
// this process's software counters over the same span (empty when perf_event_open is refused);
// cpu_ns = every thread's own CPU clock, summed, read right inside the markers (empty when a
// thread ended inside the iteration): what bench/true_numbers.py holds the agent against.
// Each iteration is framed by the USDT probes seqpoint:iteration_begin/end.
//
// Order matters: the perf counters are opened first, before libtorch starts worker threads,
// so that inherit=1 covers them (perf_self_counters.h).
#include <dirent.h>
#include <seqpoint/usdt.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>

#include "common/trace_csv.h"
#include "examples/batching.h"
#include "examples/corpus.h"
#include "examples/perf_self_counters.h"
#include "examples/seq2seq_trainer.h"
#include "examples/train_options.h"

namespace seqpoint::examples {
namespace {

constexpr const char* kMetricNames[] = {"time_ns", "task_clock_ns", "page_faults",
                                        "context_switches", "cpu_ns"};
constexpr uint64_t kFlushEvery = 200;  // rows; a killed run keeps all but the last few

// Every thread's own CPU clock, summed ({tid: ns}): the process's CPU time as its threads' own
// clocks read it. Not CLOCK_PROCESS_CPUTIME_ID, which reads a sibling running on another CPU as
// of that CPU's last tick; a thread's clock brings it up to now (task_sched_runtime).
std::map<pid_t, uint64_t> ThreadsCpuNs() {
  std::map<pid_t, uint64_t> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (dirent* d = readdir(dir)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(d->d_name));
    timespec ts{};
    // MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), as pthread_getcpuclockid builds it.
    const clockid_t clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6);
    if (tid > 0 && clock_gettime(clock, &ts) == 0) {
      out[tid] =
          static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
    }
  }
  closedir(dir);
  return out;
}

// CPU time between two ThreadsCpuNs readings; NaN when a thread ended in between (unreadable).
double CpuBetween(const std::map<pid_t, uint64_t>& a, const std::map<pid_t, uint64_t>& b) {
  double sum = 0;
  for (const auto& [tid, ns] : a) {
    if (b.count(tid) == 0) return std::nan("");
  }
  for (const auto& [tid, ns] : b) {
    auto it = a.find(tid);
    sum += static_cast<double>(ns - (it == a.end() ? 0 : it->second));
  }
  return sum;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "seqpoint-train: %s\n", s.ToString().c_str());
  return 1;
}

Result<std::unique_ptr<TraceWriter>> OpenTrace(const TrainOptions& o, const Corpus& corpus,
                                               const PerfSelfCounters* perf, int threads,
                                               int64_t parameters) {
  TraceSchema schema;
  schema.has_iter = schema.has_batch = schema.has_tokens = schema.has_epoch = true;
  schema.metrics.assign(std::begin(kMetricNames), std::end(kMetricNames));
  auto w = TraceWriter::Create(o.trace, schema);
  if (!w.ok()) return w.status();
  auto comment = [&](const char* format, auto... args) {
    char text[1024];
    std::snprintf(text, sizeof text, format, args...);
    return (*w)->AppendComment(text);
  };
  SEQPOINT_RETURN_IF_ERROR(
      comment("seqpoint-train model=%s hidden=%lld layers=%lld heads=%lld "
              "dropout=%g lr=%g parameters=%lld",
              o.model.c_str(), static_cast<long long>(o.hidden), static_cast<long long>(o.layers),
              static_cast<long long>(o.heads), o.dropout, o.learning_rate,
              static_cast<long long>(parameters)));
  SEQPOINT_RETURN_IF_ERROR(comment("corpus=%s pairs=%zu vocab_en=%zu vocab_de=%zu max_len=%zu",
                                   o.corpus.c_str(), corpus.pairs.size(), corpus.src_vocab.size(),
                                   corpus.tgt_vocab.size(), o.corpus_options.max_len));
  SEQPOINT_RETURN_IF_ERROR(comment("batching=%s batch_size=%zu bucket_width=%zu",
                                   BatchingModeName(o.batching.mode), o.batching.batch_size,
                                   o.batching.bucket_width));
  SEQPOINT_RETURN_IF_ERROR(comment("threads=%d seed=%llu torch=%s", threads,
                                   static_cast<unsigned long long>(o.seed),
                                   TorchVersion().c_str()));
  SEQPOINT_RETURN_IF_ERROR(comment("perf=%s", perf == nullptr ? "unavailable (perf columns empty)"
                                              : perf->user_only()
                                                  ? "software events, user mode only"
                                                  : "software events, user+kernel"));
  SEQPOINT_RETURN_IF_ERROR(comment("%s",
                                   "seq_len=padded source length; tokens=real source+target "
                                   "words (no padding); time_ns=forward+backward+Adam step"));
  return w;
}

// libgomp and OpenBLAS read their settings from the environment when they load, before main,
// so a warning is all the binary can do; run-train.sh sets them.
void WarnAboutEnvironment() {
  const char* missing[3];
  int n = 0;
  for (const char* name : {"OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS", "GLIBC_TUNABLES"}) {
    if (std::getenv(name) == nullptr) missing[n++] = name;
  }
  if (n == 0) return;
  std::fprintf(stderr,
               "seqpoint-train: warning: %s%s%s%s%s not set; run through run-train.sh "
               "(idle OpenMP workers otherwise spin, and iterations on a busy machine take up "
               "to 5x longer)\n",
               missing[0], n > 1 ? ", " : "", n > 1 ? missing[1] : "", n > 2 ? ", " : "",
               n > 2 ? missing[2] : "");
}

int Run(const TrainOptions& o) {
  WarnAboutEnvironment();
  // 1. Counters before any libtorch thread exists.
  std::unique_ptr<PerfSelfCounters> perf;
  if (auto p = PerfSelfCounters::Open(); p.ok()) {
    perf = std::move(*p);
  } else {
    std::fprintf(stderr, "seqpoint-train: warning: %s; the perf columns stay empty\n",
                 p.status().ToString().c_str());
  }
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (Status s = ConfigureTorchThreads(threads); !s.ok()) return Fail(s);

  auto corpus = LoadCorpus(o.corpus, o.corpus_options);
  if (!corpus.ok()) return Fail(corpus.status());
  std::fprintf(stderr,
               "seqpoint-train: %s: %zu pairs (%zu without words skipped, %zu truncated to %zu "
               "tokens), vocabularies %zu en / %zu de\n",
               o.corpus.c_str(), corpus->pairs.size(), corpus->skipped_empty, corpus->truncated,
               o.corpus_options.max_len, corpus->src_vocab.size(), corpus->tgt_vocab.size());

  ModelConfig mc{o.model,
                 static_cast<int64_t>(corpus->src_vocab.size()),
                 static_cast<int64_t>(corpus->tgt_vocab.size()),
                 o.hidden,
                 o.layers,
                 o.heads,
                 o.dropout,
                 o.learning_rate,
                 o.seed};
  auto trainer = Seq2SeqTrainer::Create(mc);
  if (!trainer.ok()) return Fail(trainer.status());

  std::unique_ptr<TraceWriter> trace;
  if (!o.trace.empty()) {
    auto w = OpenTrace(o, *corpus, perf.get(), threads, (*trainer)->parameter_count());
    if (!w.ok()) return Fail(w.status());
    trace = std::move(*w);
  }

  const uint64_t max_epochs = (o.iterations == 0 && o.epochs == 0) ? 1 : o.epochs;
  uint64_t iter = 0;
  double loss_sum = 0, window_ns = 0;
  uint64_t window = 0;
  const auto run_start = std::chrono::steady_clock::now();
  bool finished = false;
  for (uint64_t epoch = 0; !finished && (max_epochs == 0 || epoch < max_epochs); ++epoch) {
    std::vector<Batch> plan = PlanEpoch(corpus->pairs, o.batching, epoch);
    if (plan.empty()) {
      return Fail(InvalidArgument(
          "no batch of --batch-size " + std::to_string(o.batching.batch_size) + " fits in " +
          o.corpus +
          (o.batching.mode == BatchingMode::kBucket
               ? " (each length bucket holds fewer pairs); lower --batch-size or raise "
                 "--bucket-width"
               : " (it holds fewer pairs); lower --batch-size")));
    }
    for (const Batch& indices : plan) {
      if (o.iterations != 0 && iter >= o.iterations) {
        finished = true;
        break;
      }
      // The batch is ready before the iteration starts, as with a prefetching data loader.
      const PaddedBatch batch = MakePaddedBatch(corpus->pairs, indices);
      SelfCounterValues before, after;
      bool counted = perf != nullptr;
      SEQPOINT_ITERATION_BEGIN(iter, batch.src_len, batch.batch, batch.tokens);
      const auto cpu0 = ThreadsCpuNs();
      if (counted) {
        auto r = perf->Read();
        counted = r.ok();
        if (counted) before = *r;
      }
      const auto t0 = std::chrono::steady_clock::now();
      auto loss = (*trainer)->Step(batch);
      const auto t1 = std::chrono::steady_clock::now();
      if (counted) {
        auto r = perf->Read();
        counted = r.ok();
        if (counted) after = *r;
      }
      const double cpu_ns = CpuBetween(cpu0, ThreadsCpuNs());
      SEQPOINT_ITERATION_END(iter);
      if (!loss.ok()) return Fail(loss.status().WithContext("iteration " + std::to_string(iter)));

      const double ns = static_cast<double>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      if (trace) {
        const double nan = std::nan("");
        double m[5] = {ns, counted ? double(after.task_clock_ns - before.task_clock_ns) : nan,
                       counted ? double(after.page_faults - before.page_faults) : nan,
                       counted ? double(after.context_switches - before.context_switches) : nan,
                       cpu_ns};
        TraceRow row;
        row.iter = iter;
        row.seq_len = batch.src_len;
        row.batch = batch.batch;
        row.tokens = batch.tokens;
        row.epoch = static_cast<int64_t>(epoch);
        row.metrics = m;
        if (Status s = trace->Append(row); !s.ok()) return Fail(s);
        if ((iter + 1) % kFlushEvery == 0) {
          if (Status s = trace->Flush(); !s.ok()) return Fail(s);
        }
      }
      loss_sum += *loss;
      window_ns += ns;
      ++iter;
      if (++window == o.log_every) {
        std::fprintf(stderr, "seqpoint-train: iter %llu epoch %llu loss %.4f  %.1f ms/iter\n",
                     static_cast<unsigned long long>(iter), static_cast<unsigned long long>(epoch),
                     loss_sum / double(window), window_ns / double(window) / 1e6);
        loss_sum = window_ns = 0;
        window = 0;
      }
    }
  }
  if (trace) {
    if (Status s = trace->Flush(); !s.ok()) return Fail(s);
  }
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  std::fprintf(stderr, "seqpoint-train: done, %llu iterations in %.1f s\n",
               static_cast<unsigned long long>(iter), total_s);
  return 0;
}

}  // namespace
}  // namespace seqpoint::examples

int main(int argc, char** argv) {
  auto options = seqpoint::examples::ParseTrainOptions(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "seqpoint-train: %s\n", options.status().message().c_str());
    return 2;
  }
  if (options->help) {
    std::fputs(seqpoint::examples::TrainUsage(), stdout);
    return 0;
  }
  return seqpoint::examples::Run(*options);
}
