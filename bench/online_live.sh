#!/usr/bin/env bash
# The online projection live: a private seqpointd (default selection settings) watches real
# PyTorch runs of examples/train_torch.py, marked with seqpoint_probe, and its projections are
# compared with the trainer's own every-iteration measurements (its --trace):
#   time_ns         projected from the SeqPoints alone vs the trainer's summed iteration times
#   perf:task-clock projected through every iteration's time vs the trainer's own CPU time
# Runs: random and bucketed batching, with and without a busy process pinned to the trainer's
# CPU from the middle of the run on (--slowdown-at 0.5). Needs root (eBPF) and a build.
# Usage: bench/online_live.sh [OUTDIR]   Environment: SEQPOINT_BUILD (default build), RUNS
# (space-separated "model:batching:iterations:slowdown", default below).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
out="${1:-$(mktemp -d /tmp/seqpoint-online-live.XXXXXX)}"
mkdir -p "$out"
[ "$(id -u)" = 0 ] || { echo "online_live: eBPF probes need root: run with sudo" >&2; exit 1; }
for b in "$build/agent/daemon/seqpointd" "$build/agent/cli/seqpoint"; do
  [ -x "$b" ] || { echo "online_live: $b missing: build first (cmake --build $build)" >&2; exit 1; }
done
RUNS="${RUNS:-gru:random:1000:0 gru:random:1000:0.5 lstm:bucketed:1600:0 lstm:bucketed:1600:0.5}"
printf '[collectors]\nperf.events = ["task-clock"]\n' > "$out/seqpointd.toml"
export SEQPOINT_CONTROL_SOCKET="$out/run/control.sock"
seqpoint="$build/agent/cli/seqpoint"
"$build/agent/daemon/seqpointd" --config "$out/seqpointd.toml" --state-dir "$out/state" \
  --runtime-dir "$out/run" --metrics-listen 127.0.0.1:0 2>"$out/seqpointd.log" &
daemon=$!
cleanup() { kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do "$seqpoint" status >/dev/null 2>&1 && break; sleep 0.1; done

echo "| run | iterations | measured | warm-up | changes | time err | covered | task-clock vs trainer CPU | covered |"
echo "|---|---|---|---|---|---|---|---|---|"
n=0
for spec in $RUNS; do
  IFS=: read -r model batching iters slow <<<"$spec"
  n=$((n + 1))
  run="live-$$-$n"
  args=(--model "$model" --batching "$batching" --iterations "$iters" --seed "$n"
        --trace "$out/$run.csv")
  # The busy process is started here, not by the trainer: perf counters follow forks, so a
  # child of the trainer would be counted as the trainer's CPU time.
  [ "$slow" != 0 ] && args+=(--slowdown-at "$slow" --slowdown-file "$out/$run.slow")
  SEQPOINT_RUN_ID="$run" /usr/bin/python3 "$root/examples/train_torch.py" "${args[@]}" \
    >"$out/$run.log" 2>&1 &
  trainer=$!
  busy=""
  while kill -0 "$trainer" 2>/dev/null; do
    if [ -z "$busy" ] && [ -s "$out/$run.slow" ]; then
      taskset -c "$(cat "$out/$run.slow")" python3 -c 'while True: pass' &
      busy=$!
    fi
    # The live view, as an operator would read it, while the run is active.
    # (A closed run is answered from the store, without its live time strata: keep the last
    # active view.)
    "$seqpoint" show "$run" --json >"$out/$run.live.json.tmp" 2>/dev/null &&
      grep -q '"time_strata"' "$out/$run.live.json.tmp" &&
      mv "$out/$run.live.json.tmp" "$out/$run.live.json"
    sleep 0.5
  done
  [ -n "$busy" ] && kill "$busy" 2>/dev/null
  wait "$trainer" || { echo "online_live: trainer failed, see $out/$run.log" >&2; exit 1; }
  sleep 2
  "$seqpoint" show "$run" --json >"$out/$run.show.json"
  python3 - "$out/$run.show.json" "$out/$run.csv" "$model $batching${slow/#0/}" "$out/$run.live.json" <<'PY'
import csv, json, os, sys
show = json.load(open(sys.argv[1]))
# Strata are live state: the last view of the active run has them.
live = json.load(open(sys.argv[4])) if os.path.exists(sys.argv[4]) else {}
rows = list(csv.DictReader(l for l in open(sys.argv[2]) if not l.startswith("#")))
time = sum(float(r["time_ns"]) for r in rows)
cpu = sum(float(r["cpu_ns"]) for r in rows)
p = show["projections"]
t = p["time_ns"]
tc = p.get("perf:task-clock")
st = live.get("time_strata", {})
measured = sum(len(x["iters"]) for x in show["seqpoints"])
def err(proj, actual):
    return 100.0 * (proj - actual) / actual
def cov(q, actual):
    hi = q["high"] if q["high"] is not None else float("inf")
    return "yes" if q["low"] <= actual <= hi else "no"
label = sys.argv[3].replace(".5", ", slowdown from 50%")
cells = [label, str(len(rows)), str(measured), str(st.get("warmup_end", "-")),
         str(len(st.get("changes", []))), "%+.2f%%" % err(t["total"], time), cov(t, time)]
if tc:
    cells += ["%+.2f%%" % err(tc["total"], cpu), cov(tc, cpu)]
else:
    cells += ["-", "-"]
print("| " + " | ".join(cells) + " |")
PY
done
echo "files in $out"
