#!/usr/bin/env bash
# Every benchmark, one command: bench/run-all.sh [BUILD_DIR] [--quick] [--with-traces] [--no-build]
# Each benchmark prints its figures with a baseline measured in the same run. Root is needed
# for the eBPF and agent benchmarks (skipped otherwise, and said so).
#   --quick        shorter cells and smaller sizes everywhere (about 15 minutes on 2 cores
#                  instead of about 45): for a development check, not for the published figures
#   --with-traces  also makes the 12 real training traces (about 30 minutes on 2 cores) and
#                  prints the accuracy table
#   --no-build     use BUILD_DIR as it is (a tree others build in)
# Run it on an otherwise idle machine: timings are the product.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build
traces=0
quick=0
do_build=1
for a in "$@"; do
  case "$a" in
    --with-traces) traces=1 ;;
    --quick) quick=1 ;;
    --no-build) do_build=0 ;;
    -*) echo "run-all: unknown option $a (--quick, --with-traces, --no-build)" >&2; exit 2 ;;
    *) build=$a ;;
  esac
done
if [ $do_build = 1 ]; then
  cmake --build "$build" -j "$(nproc)" >/dev/null || { echo "run-all: build failed" >&2; exit 1; }
fi
section() { printf '\n===== %s =====\n' "$*"; }
q() { [ $quick = 1 ] && echo "$1" || echo "$2"; }  # q QUICK FULL: the size for this mode
root=0
[ "$(id -u)" = 0 ] && root=1
section "selector: ingest, selection time and memory (10^6, 10^7 iterations)"
"$build/bench/selector_bench"
section "trace scale: select on $(q "10^7" "10^8") rows"
bench/trace_scale.sh "$(q 10000000 100000000)" "$build"
section "online selection on the recorded PyTorch runs (tests/data/online) and the libtorch run"
for d in tests/data/online tests/data/agent; do
  bench/online_accuracy.py "$d" --seqpoint "$build/agent/cli/seqpoint"
done
section "interval coverage: 36 replayed and generated runs, and a 10^6-iteration run"
bench/interval_coverage.py --seqpoint "$build/agent/cli/seqpoint" $(q "" --million)
section "projection recompute: 20 metrics, before/after cell reuse"
"$build/bench/projection_bench"
section "state database: one flush for 1, 8 and 64 active runs (changed rows only)"
"$build/bench/store_bench" "$(q 10 30)"
section "report --html for a 10^6-iteration run"
bench/report_scale.py --seqpoint "$build/agent/cli/seqpoint"
section "firmware-shim: one gpu_metrics read"
"$build/bench/firmware_shim_bench" "$PWD"
section "agent: energy on every iteration, observer-effect estimate"
"$build/bench/energy_sampler_bench" "$PWD"
section "agent: observer-effect alarms (false alarms per 1,000 runs, delay at +10/+20/+40%)"
"$build/bench/observer_effect_bench" "$PWD"
section "collectors: begin+end per collector"
"$build/bench/collectors_bench" "$PWD" "$build/collectors/libseqpoint_fake_nvml.so"
[ -x "$build/bench/collectors_papi_bench" ] && "$build/bench/collectors_papi_bench"
if [ $root = 1 ]; then
  section "ebpf: probe hit cost, ring buffer throughput, hook latency"
  "$build/bench/ebpf_probe_bench" 5
  section "ebpf: counter windows at the probes vs from user space (task-clock per iteration)"
  "$build/bench/probe_counters_bench" 200 2 2000
  section "ebpf: trainer slowdown with probes attached (paired)"
  SEQPOINT_BUILD="$build" bench/ebpf_overhead.sh
  section "agent: CPU, RSS and trainer slowdown with seqpointd watching (paired)"
  SEQPOINT_BUILD="$build" THREADS=1 bench/agent_overhead.sh 6 300
  section "online selection live: seqpointd on PyTorch runs, with and without a mid-run slowdown"
  SEQPOINT_BUILD="$build" bench/online_live.sh
  section "data-parallel runs live: 2 and 4 gloo ranks under torchrun, Slurm and MPI environments"
  SEQPOINT_BUILD="$build" bench/ddp_runs.sh
  section "every measured iteration against the workload's own reading (PyTorch, 1-8 threads)"
  SEQPOINT_BUILD="$build" bench/true_numbers.py
  section "fleet: 4 nodes, one slowed by 10/20/50%, alerted by the shipped rules (Prometheus)"
  SEQPOINT_BUILD="$build" bench/fleet/run.sh
  section "slow ranks live: steps to name a rank slowed 1.1/1.25/1.5x (PyTorch DDP, gloo)"
  SEQPOINT_BUILD="$build" bench/fleet/slow_rank_live.sh
  section "slow ranks live: false alarms on healthy DDP jobs, with and without a CPU hog"
  SEQPOINT_BUILD="$build" bench/fleet/slow_rank_false_alarms.sh
  section "cost: 1, 8, 64 processes x 10..10^4 iterations/s, loop latency, PyTorch, measured share"
  bench/cost/cost_bench.py --build "$build" $(q --quick "")
  section "idle: seqpointd watching 64 idle processes (CPU and wake-ups)"
  SEQPOINT_BUILD="$build" SETTLE_S="$(q 10 20)" bench/idle_watch.sh 64 "$(q 10 20)"
  section "node cost: package size, agent CPU/RSS idle and busy"
  packaging/measure-node-cost.sh "$build" 60 2
else
  echo "run-all: not root: eBPF and agent benchmarks skipped"
fi
section "soak: $(q "10^6" "10^7") iterations over $(q 10 100) runs, RSS, state database, log and spool flat"
bench/soak.py --seqpointd "$build/agent/daemon/seqpointd" $(q "--rows 100000 --runs 10" "")
if [ $traces = 1 ]; then
  section "accuracy on real training (12 traces)"
  out=$(mktemp -d /tmp/seqpoint-traces.XXXXXX)
  SEQPOINT_TRAIN="$build/examples/seqpoint-train" SEQPOINT_CORPORA="$build/examples/corpora" \
    examples/make_traces.sh "$out" 5000
  bench/accuracy.py "$out" --seqpoint "$build/agent/cli/seqpoint"
  section "online against offline on 12 PyTorch runs (examples/make_online_traces.sh)"
  examples/make_online_traces.sh "$out/online"
  bench/online_accuracy.py "$out/online" --seqpoint "$build/agent/cli/seqpoint"
fi
