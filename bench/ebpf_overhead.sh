#!/usr/bin/env bash
# Slowdown of the real libtorch trainer (examples/seqpoint-train) with the iteration probes
# attached by `seqpoint probe`, against the same run without them, in alternating pairs with the
# same seed (so both runs process the same seq_len sequence). Needs root.
#
#   bench/ebpf_overhead.sh [PAIRS] [ITERATIONS]      (defaults 6 pairs x 300 iterations)
#
# Per run, the measures are the sums of the trainer's own per-iteration time_ns (wall) and
# task_clock_ns (CPU time of the process, which includes the probes' cost, since a uprobe runs
# in the traced thread, and excludes time other jobs on a shared machine take): from its
# --trace, so start-up (corpus loading) does not dilute the ratio. Pairs alternate their order (off-on,
# on-off, ...) to cancel drift. Prints each pair's ratio on/off and the median, and checks that
# the trace `seqpoint probe` captured has the trainer's iterations with the same seq_len.
# Environment: SEQPOINT_BUILD (build dir with agent/cli/seqpoint; default build),
# SEQPOINT_TRAIN (trainer binary; default the first build-*/examples/seqpoint-train),
# CORPUS (default ende_fillets.tsv next to the trainer), MODEL (gru), THREADS (2),
# PROBE_ARGS (extra `seqpoint probe` arguments, e.g. "--preset torch-cpu-adam" to measure the
# zero-code probes instead of USDT, with SEQPOINT_TRAIN a copy of the trainer without its USDT
# notes (objcopy --remove-section .note.stapsdt), since the provider wins over zero-code probes;
# the check then counts the rows where the captured SL equals seq_len or seq_len x batch).
set -euo pipefail

pairs="${1:-6}"
iterations="${2:-300}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
seqpoint="$build/agent/cli/seqpoint"
train="${SEQPOINT_TRAIN:-}"
if [ -z "$train" ]; then
  for candidate in "$build/examples/seqpoint-train" "$root"/build*/examples/seqpoint-train; do
    if [ -x "$candidate" ]; then train="$candidate"; break; fi
  done
fi
[ "$(id -u)" -eq 0 ] || { echo "ebpf_overhead.sh: needs root (attaches eBPF probes)" >&2; exit 1; }
[ -x "$seqpoint" ] || { echo "ebpf_overhead.sh: no $seqpoint: build target seqpoint" >&2; exit 1; }
[ -n "$train" ] && [ -x "$train" ] ||
  { echo "ebpf_overhead.sh: no seqpoint-train found: build examples or set SEQPOINT_TRAIN" >&2; exit 1; }
corpus="${CORPUS:-$(dirname "$train")/corpora/ende_fillets.tsv}"
model="${MODEL:-gru}"
threads="${THREADS:-2}"
out="$(mktemp -d /tmp/seqpoint-ebpf-overhead.XXXXXX)"

run_train() {  # $1 = trace path; runs in the background, sets $train_pid
  SEQPOINT_TRAIN="$train" "$root/examples/run-train.sh" --corpus "$corpus" --model "$model" \
    --iterations "$iterations" --seed 1 --threads "$threads" --log-every 100000 \
    --trace "$1" >/dev/null 2>&1 &
  train_pid=$!
}

sum_col() {  # $1 = trace, $2 = column: the column's total
  awk -F, -v col="$2" '/^#/ {next} !h {for (i = 1; i <= NF; i++) if ($i == col) c = i; h = 1; next}
                       {s += $c} END {printf "%.0f\n", s}' "$1"
}

one_run() {  # $1 = off|on, $2 = pair index; prints "time_ns_sum task_clock_ns_sum"
  local trace="$out/$1_$2.csv"
  run_train "$trace"
  if [ "$1" = on ]; then
    # run-train.sh execs the trainer, so $train_pid is the trainer; --wait covers the instant
    # before exec. The tool exits when the trainer does.
    # shellcheck disable=SC2086 # PROBE_ARGS is a list of words
    "$seqpoint" probe --pid "$train_pid" --wait --out "$out/probe_$2.csv" ${PROBE_ARGS:-} \
      2>"$out/probe_$2.log" &
    local probe_pid=$!
    wait "$train_pid"
    wait "$probe_pid" || { echo "seqpoint probe failed:" >&2; cat "$out/probe_$2.log" >&2; exit 1; }
  else
    wait "$train_pid"
  fi
  echo "$(sum_col "$trace" time_ns) $(sum_col "$trace" task_clock_ns)"
}

echo "ebpf_overhead: $pairs pairs x $iterations iterations, $model on $(basename "$corpus"), $threads threads; traces in $out"
ratios=()
cpu_ratios=()
for ((p = 1; p <= pairs; p++)); do
  if ((p % 2)); then off=$(one_run off "$p"); on=$(one_run on "$p")
  else on=$(one_run on "$p"); off=$(one_run off "$p"); fi
  ratio=$(awk -v a="${on% *}" -v b="${off% *}" 'BEGIN {printf "%.4f", a / b}')
  cpu_ratio=$(awk -v a="${on#* }" -v b="${off#* }" 'BEGIN {printf "%.4f", a / b}')
  ratios+=("$ratio")
  cpu_ratios+=("$cpu_ratio")
  # The probe's capture must be the trainer's iterations: same count, same seq_len sequence.
  captured=$(grep -cv -e '^#' -e '^iter' "$out/probe_$p.csv" || true)
  if [ -z "${PROBE_ARGS:-}" ]; then
    ours=$(awk -F, '/^#/ || /^iter/ {next} {print $1 "," $2}' "$out/probe_$p.csv" | sort -n | md5sum)
    theirs=$(awk -F, '/^#/ {next} !h {h = 1; next} {print $1 "," $2}' "$out/on_$p.csv" | sort -n | md5sum)
    same=$([ "$ours" = "$theirs" ] && echo "same iter,seq_len as the trainer's trace" || echo "DIFFERS from the trainer's trace")
  else  # zero-code: how the captured SL relates to the trainer's seq_len (and batch), row by row
    same=$(paste -d, <(awk -F, '/^#/ {next} !h {h = 1; next} {print $2 "," $3}' "$out/on_$p.csv") \
                     <(awk -F, '/^#/ || /^iter/ {next} {print $2}' "$out/probe_$p.csv") |
      awk -F, 'NF == 3 && $3 != "" {n++; if ($3 == $1) sl++; if ($3 == $1 * $2) tok++}
               END {printf "captured SL == trainer seq_len on %d/%d rows, == seq_len x batch on %d/%d", sl, n, tok, n}')
  fi
  printf "pair %d: off %.3f s, on %.3f s: time ratio on/off %s, CPU-time ratio %s; probe captured %s iterations, %s\n" \
    "$p" "$(awk -v x="${off% *}" 'BEGIN {print x / 1e9}')" \
    "$(awk -v x="${on% *}" 'BEGIN {print x / 1e9}')" "$ratio" "$cpu_ratio" "$captured" "$same"
done
median() {  # $1 = label, then the ratios
  local label="$1"; shift
  printf '%s\n' "$@" | sort -n | awk -v label="$label" '{r[NR] = $1} END {
    m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
    printf "median %s ratio on/off %.4f (slowdown %+.2f%%; min %.4f, max %.4f; target <= +0.3%%)\n",
           label, m, (m - 1) * 100, r[1], r[NR]}'
}
median "iteration-time" "${ratios[@]}"
median "CPU-time" "${cpu_ratios[@]}"
