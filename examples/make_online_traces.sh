#!/usr/bin/env bash
# Produces PyTorch iteration traces for judging online sampling/projection (seqpoint evaluate
# --online): real training with warm-up, random vs bucketed batching, and a real slowdown that
# starts in the middle of a run. Every trace comes from examples/train_torch.py, one thread:
#   <model>_<batching>_s<seed>.csv        gru|lstm x random|bucketed, seeds $SEEDS (1 2)
#   <model>_<batching>_slow_s<seed>.csv   the same with --slowdown-at 0.5 (first seed only):
#                                         from the middle on a busy-loop process shares the
#                                         trainer's CPU, so wall time per iteration about
#                                         doubles while cpu_ns does not
# usage: examples/make_online_traces.sh OUTDIR
# Sizes: hidden 64, vocabulary 2000, batch 32, max-len 40: an iteration takes ~10-15 ms
# (bucketed) or ~30-40 ms (random, padded to the batch's longest), so a trace takes <= ~60 s
# on a 2-core machine; 12 traces ~8 minutes. Idempotent: existing traces are kept (a run that
# did not finish leaves only NAME.csv.partial, redone next time). Each run's stderr goes to
# NAME.log, its summary line to OUTDIR/summary.txt. Environment: PYTHON (/usr/bin/python3),
# SEEDS ("1 2"). Run it on an otherwise idle machine: the timings are the product.
set -euo pipefail

if [ $# -ne 1 ] || [ "${1:0:1}" = "-" ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out="$1"
python="${PYTHON:-/usr/bin/python3}"
read -r -a seeds <<< "${SEEDS:-1 2}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
trainer="$here/train_torch.py"

if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "make_online_traces.sh: $python cannot import torch; install python3-torch (Debian) or" \
       "set PYTHON to an interpreter that has it" >&2
  exit 1
fi
mkdir -p "$out"
summary="$out/summary.txt"

# Iterations per run: random batches cost ~3x bucketed ones; slowdown runs double their
# second half. Each stays at <= ~60 s.
iterations() {
  case "$1_$2" in
    random_) echo 1200 ;;
    bucketed_) echo 2000 ;;
    random_slow) echo 1000 ;;
    bucketed_slow) echo 1600 ;;
  esac
}

made=0
skipped=0
start_all=$(date +%s)
run_one() {  # model batching slow(""|slow) seed
  local model="$1" batching="$2" slow="$3" seed="$4"
  local name="${model}_${batching}${slow:+_$slow}_s${seed}"
  local trace="$out/$name.csv"
  if [ -e "$trace" ]; then
    echo "$name: exists, skipped"
    skipped=$((skipped + 1))
    return
  fi
  local args=(--model "$model" --batching "$batching" --seed "$seed" --threads 1
              --hidden 64 --vocab 2000 --batch 32 --max-len 40 --log-every 100
              --iterations "$(iterations "$batching" "$slow")" --trace "$trace")
  [ -n "$slow" ] && args+=(--slowdown-at 0.5)
  local start line
  start=$(date +%s)
  if ! line=$("$python" "$trainer" "${args[@]}" 2> "$out/$name.log"); then
    echo "make_online_traces.sh: $name failed; $out/$name.log says:" >&2
    tail -n 5 "$out/$name.log" >&2
    exit 1
  fi
  echo "$line"
  echo "$name: $line load_avg=$(cut -d' ' -f1-3 /proc/loadavg) wall_s=$(($(date +%s) - start))" \
    >> "$summary"
  made=$((made + 1))
}

for seed in "${seeds[@]}"; do
  for model in gru lstm; do
    for batching in random bucketed; do
      run_one "$model" "$batching" "" "$seed"
    done
  done
  if [ "$seed" = "${seeds[0]}" ]; then
    for model in gru lstm; do
      for batching in random bucketed; do
        run_one "$model" "$batching" slow "$seed"
      done
    done
  fi
done
echo "make_online_traces.sh: $made traces made, $skipped kept, in $(($(date +%s) - start_all)) s" \
     "-> $out"
