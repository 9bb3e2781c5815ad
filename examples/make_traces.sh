#!/usr/bin/env bash
# Produces the evidence traces of the SeqPoint method on real training:
#   for corpus in catalogs fillets, for model in gru transformer:
#     <corpus>_<model>_t2_run1.csv   2 threads, seed 1
#     <corpus>_<model>_t2_run2.csv   2 threads, seed 1 again: run-to-run noise
#     <corpus>_<model>_t1_run1.csv   1 thread,  seed 1: the same seq_len sequence, for speedup
# usage: examples/make_traces.sh OUTDIR [ITERATIONS]   (default 2000 iterations a run)
# Each run's stderr (loss curve) goes to <name>.log; OUTDIR/summary.txt lists wall times.
# Sizes are chosen so that the 12 runs take about 15-20 minutes on a 2-core machine; run it
# on an otherwise idle machine, since timings are the product. Environment: SEQPOINT_TRAIN
# (binary), SEQPOINT_CORPORA (directory of the decompressed .tsv corpora), BATCHING
# (bucket|random, default bucket).
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUTDIR [ITERATIONS]" >&2
  exit 2
fi
out="$1"
iterations="${2:-2000}"
batching="${BATCHING:-bucket}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

corpora="${SEQPOINT_CORPORA:-}"
if [ -z "$corpora" ]; then
  for candidate in "$here/../build/examples/corpora" "$here/../build-examples/examples/corpora"; do
    if [ -f "$candidate/ende_fillets.tsv" ]; then corpora="$candidate"; break; fi
  done
fi
if [ -z "$corpora" ] || [ ! -f "$corpora/ende_fillets.tsv" ]; then
  echo "make_traces.sh: decompressed corpora not found; build the seqpoint_example_corpora" \
       "target or set SEQPOINT_CORPORA" >&2
  exit 1
fi

# Model sizes: one iteration of either model takes ~10-40 ms at 2 threads at typical SLs.
model_flags() {
  case "$1" in
    gru) echo "--hidden 128 --layers 1" ;;
    transformer) echo "--hidden 128 --layers 2 --heads 4" ;;
  esac
}

# "n=.. mean_ms=.. fit: time_ms = a + b*seq_len R2=.. (R2 on tokens ..)": least squares of
# time_ns on seq_len (and R^2 on tokens) over one trace, the first 20 warm-up iterations left out.
fit() {
  awk -F, '
    /^#/ { next }
    !hdr { for (i = 1; i <= NF; i++) col[$i] = i; hdr = 1; next }
    $(col["iter"]) >= 20 {
      x = $(col["seq_len"]); y = $(col["time_ns"]) / 1e6; k = $(col["tokens"])
      n++; sx += x; sy += y; sxx += x * x; sxy += x * y; syy += y * y
      sk += k; skk += k * k; sky += k * y
    }
    END {
      if (n < 3) { print "n=" n; exit }
      b = (n * sxy - sx * sy) / (n * sxx - sx * sx); a = (sy - b * sx) / n
      r = (n * sxy - sx * sy) / sqrt((n * sxx - sx * sx) * (n * syy - sy * sy))
      rk = (n * sky - sk * sy) / sqrt((n * skk - sk * sk) * (n * syy - sy * sy))
      printf "n=%d mean_ms=%.2f fit: time_ms = %.2f + %.3f*seq_len R2=%.3f (R2 on tokens %.3f)\n",
             n, sy / n, a, b, r * r, rk * rk
    }' "$1"
}

mkdir -p "$out"
summary="$out/summary.txt"
echo "# make_traces.sh $(date -u +%FT%TZ) iterations=$iterations batching=$batching" > "$summary"
start_all=$(date +%s)
for corpus in catalogs fillets; do
  case "$corpus" in
    catalogs) file="$corpora/ende_debian_catalogs.tsv" ;;
    fillets) file="$corpora/ende_fillets.tsv" ;;
  esac
  for model in gru transformer; do
    for run in t2_run1 t2_run2 t1_run1; do
      threads="${run:1:1}"
      name="${corpus}_${model}_${run}"
      start=$(date +%s)
      # shellcheck disable=SC2046  # model_flags is word-split on purpose
      "$here/run-train.sh" --corpus "$file" --model "$model" $(model_flags "$model") \
        --batching "$batching" --batch-size 32 --iterations "$iterations" --seed 1 \
        --threads "$threads" --log-every 200 --trace "$out/$name.csv" 2> "$out/$name.log"
      secs=$(( $(date +%s) - start ))
      echo "$name ${secs}s $(fit "$out/$name.csv")" | tee -a "$summary"
    done
  done
done
echo "total $(( $(date +%s) - start_all ))s" | tee -a "$summary"
