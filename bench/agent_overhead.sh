#!/usr/bin/env bash
# seqpointd watching the real libtorch trainer (examples/seqpoint-train): training slowdown with
# the agent against the same run without it, in alternating pairs with the same seed; the
# agent's CPU and memory while it watches; and the end-to-end accuracy of its live projection.
# Needs root (eBPF). Issue 5's targets: slowdown <= 0.5%, CPU <= 0.5% of a core, RSS <= 24 MiB.
#
#   bench/agent_overhead.sh [PAIRS] [ITERATIONS]        (defaults 6 pairs x 300 iterations)
#
# Per run the time measure is the sum of the trainer's own per-iteration time_ns (its --trace),
# so start-up does not dilute the ratio; pairs alternate their order to cancel drift.
# Agent CPU = (utime + stime of seqpointd over the trainer's run) / trainer wall time; RSS = the
# daemon's VmHWM (peak) and VmRSS at the end. Accuracy: the projection of iteration time and of
# perf:task-clock from the SeqPoints alone, against the trainer's own totals of time_ns and
# task_clock_ns (its in-process perf counters) over every iteration.
# Environment: SEQPOINT_BUILD (default build), SEQPOINT_TRAIN, CORPUS, MODEL (gru),
# THREADS (2), BUDGET (runs.budget, default 64), FRACTION (runs.budget_fraction, default 0),
# PERF_EVENTS (collectors.perf.events as a TOML list body, e.g. '"task-clock", "page-faults"';
# default: seqpointd's own default), OBSERVER_ACTION (runs.observer_effect_action; default: the
# daemon's, "drop"), PMU_TRAP_CHECK (true|false: collectors.perf.pmu_trap_check), SETTLE_S (seconds between the daemon's start and the trainer's, default 0).
set -euo pipefail

pairs="${1:-6}"
iterations="${2:-300}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
seqpointd="$build/agent/daemon/seqpointd"
seqpoint="$build/agent/cli/seqpoint"
train="${SEQPOINT_TRAIN:-}"
if [ -z "$train" ]; then
  for candidate in "$build/examples/seqpoint-train" "$root"/build*/examples/seqpoint-train; do
    if [ -x "$candidate" ]; then train="$candidate"; break; fi
  done
fi
[ "$(id -u)" -eq 0 ] || { echo "agent_overhead.sh: needs root (eBPF probes)" >&2; exit 1; }
for b in "$seqpointd" "$seqpoint"; do
  [ -x "$b" ] || { echo "agent_overhead.sh: no $b: build seqpointd and seqpoint" >&2; exit 1; }
done
[ -n "$train" ] && [ -x "$train" ] ||
  { echo "agent_overhead.sh: no seqpoint-train: build examples or set SEQPOINT_TRAIN" >&2; exit 1; }
corpus="${CORPUS:-$(dirname "$train")/corpora/ende_fillets.tsv}"
model="${MODEL:-gru}"
threads="${THREADS:-2}"
out="$(mktemp -d /tmp/seqpoint-agent-overhead.XXXXXX)"
printf '[runs]\nbudget = %s\nbudget_fraction = %s\n' "${BUDGET:-64}" "${FRACTION:-0}" > "$out/seqpointd.toml"
if [ -n "${OBSERVER_ACTION:-}" ]; then
  printf 'observer_effect_action = "%s"\n' "$OBSERVER_ACTION" >> "$out/seqpointd.toml"
fi
if [ -n "${PERF_EVENTS:-}" ] || [ -n "${PMU_TRAP_CHECK:-}" ]; then
  printf '[collectors]\n' >> "$out/seqpointd.toml"
  [ -z "${PERF_EVENTS:-}" ] || printf 'perf.events = [%s]\n' "$PERF_EVENTS" >> "$out/seqpointd.toml"
  [ -z "${PMU_TRAP_CHECK:-}" ] || printf 'perf.pmu_trap_check = %s\n' "$PMU_TRAP_CHECK" >> "$out/seqpointd.toml"
fi
export SEQPOINT_CONTROL_SOCKET="$out/run/control.sock"
hz=$(getconf CLK_TCK)

sum_col() {  # total of column $2 of trace $1
  awk -F, -v col="$2" '/^#/ {next} !h {for (i = 1; i <= NF; i++) if ($i == col) c = i; h = 1; next}
                       {s += $c} END {printf "%.0f\n", s}' "$1"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
now_ns() { date +%s%N; }

run_train() {  # $1 = trace, $2 = run id; foreground
  SEQPOINT_RUN_ID="$2" SEQPOINT_TRAIN="$train" "$root/examples/run-train.sh" --corpus "$corpus" \
    --model "$model" --iterations "$iterations" --seed 1 --threads "$threads" \
    --log-every 100000 --trace "$1" >/dev/null 2>&1
}

one_run() {  # $1 = off|on, $2 = pair; prints "time_sum [cpu_pct hwm_kib rss_kib err_time err_task]"
  local trace="$out/$1_$2.csv"
  if [ "$1" = off ]; then
    run_train "$trace" "off-$2"
    echo "$(sum_col "$trace" time_ns)"
    return
  fi
  rm -rf "$out/state" "$out/run"
  "$seqpointd" --config "$out/seqpointd.toml" --state-dir "$out/state" --runtime-dir "$out/run" \
    --metrics-listen 127.0.0.1:0 2>"$out/seqpointd_$2.log" &
  local d=$!
  for _ in $(seq 100); do "$seqpoint" status >/dev/null 2>&1 && break; sleep 0.1; done
  # A node agent starts long before training does; SETTLE_S lets its start-up (BPF load, the
  # perf hardware-event trap check) pass before the trainer starts, as it would in service.
  sleep "${SETTLE_S:-0}"
  local t0 c0 t1 c1
  t0=$(now_ns); c0=$(cpu_ticks "$d")
  run_train "$trace" "on-$2"
  t1=$(now_ns); c1=$(cpu_ticks "$d")
  for _ in $(seq 100); do
    "$seqpoint" runs --all --json | grep -q "\"key\": \"on-$2\"" &&
      "$seqpoint" show "on-$2" --json | grep -q '"state": "finished"' && break
    sleep 0.1
  done
  "$seqpoint" show "on-$2" --json > "$out/show_$2.json"
  local hwm rss
  hwm=$(status_kib "$d" VmHWM); rss=$(status_kib "$d" VmRSS)
  kill -TERM "$d"; wait "$d" || true
  local task; task=$(sum_col "$trace" task_clock_ns)
  local errs
  errs=$(python3 - "$out/show_$2.json" "$task" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); task = float(sys.argv[2])
c = s.get("self_check", {})
p = s["projections"].get("perf:task-clock")
et = c.get("error", float("nan"))
ek = (p["total"] - task) / task if p else float("nan")
inside = "in" if p and p["low"] <= task <= p["high"] else "out"
print(f"{et:.4f} {ek:.4f} {c.get('within_interval', False)} {inside}")
PY
)
  local cpu
  cpu=$(awk -v a="$c0" -v b="$c1" -v t0="$t0" -v t1="$t1" -v hz="$hz" \
        'BEGIN {printf "%.3f", 100 * (b - a) / hz / ((t1 - t0) / 1e9)}')
  echo "$(sum_col "$trace" time_ns) $cpu $hwm $rss $errs"
}

echo "agent_overhead: $pairs pairs x $iterations iterations, $model on $(basename "$corpus"), $threads threads, budget ${BUDGET:-64}; files in $out"
: > "$out/summary"
for ((p = 1; p <= pairs; p++)); do
  if ((p % 2)); then off=$(one_run off "$p"); on=$(one_run on "$p")
  else on=$(one_run on "$p"); off=$(one_run off "$p"); fi
  read -r on_t cpu hwm rss et ek within inside <<<"$on"
  ratio=$(awk -v a="$on_t" -v b="$off" 'BEGIN {printf "%.4f", a / b}')
  echo "$ratio $cpu $hwm $rss $et $ek" >> "$out/summary"
  printf "pair %d: off %.3f s, on %.3f s, ratio %s | agent CPU %s%% of a core, RSS peak %s KiB (end %s KiB) | projection error: time %+.2f%% (actual in 95%% interval: %s), perf task-clock %+.2f%% (%s)\n" \
    "$p" "$(awk -v x="$off" 'BEGIN {print x / 1e9}')" "$(awk -v x="$on_t" 'BEGIN {print x / 1e9}')" \
    "$ratio" "$cpu" "$hwm" "$rss" "$(awk -v x="$et" 'BEGIN {print 100 * x}')" "$within" \
    "$(awk -v x="$ek" 'BEGIN {print 100 * x}')" "$inside"
done
median() { sort -n | awk '{r[NR] = $1} END {printf "%.4f", (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2}'; }
m_ratio=$(cut -d' ' -f1 "$out/summary" | median)
m_cpu=$(cut -d' ' -f2 "$out/summary" | median)
max_hwm=$(cut -d' ' -f3 "$out/summary" | sort -n | tail -1)
m_et=$(cut -d' ' -f5 "$out/summary" | awk '{print ($1 < 0 ? -$1 : $1)}' | median)
m_ek=$(cut -d' ' -f6 "$out/summary" | awk '{print ($1 < 0 ? -$1 : $1)}' | median)
printf "median ratio on/off %s (slowdown %+.2f%%; target <= +0.5%%)\n" "$m_ratio" "$(awk -v m="$m_ratio" 'BEGIN {print (m - 1) * 100}')"
printf "median agent CPU %s%% of a core (target <= 0.5%%); peak RSS %s KiB = %.1f MiB (target <= 24 MiB)\n" "$m_cpu" "$max_hwm" "$(awk -v k="$max_hwm" 'BEGIN {print k / 1024}')"
printf "median |projection error|: iteration time %.2f%%, perf task-clock %.2f%%\n" "$(awk -v x="$m_et" 'BEGIN {print 100 * x}')" "$(awk -v x="$m_ek" 'BEGIN {print 100 * x}')"
