#!/usr/bin/env bash
# Data-parallel runs live: a private seqpointd watches real gloo DDP jobs of
# examples/train_torch.py --ddp, started by examples/launch_ddp.py with the environment of
# torchrun, srun (Slurm) and mpirun (Open MPI), 2 and 4 ranks each, and its projections are
# compared with the ranks' own every-iteration measurements (their --trace files):
#   time_ns          projected from the SeqPoints alone vs the steps' time from the ranks' own
#                    CLOCK_MONOTONIC stamps (first rank's begin to last rank's end, summed)
#   perf:task-clock  projected vs the ranks' own CPU time, summed over the ranks
# Needs root (eBPF), python3-torch and a build. Usage: bench/ddp_runs.sh [OUTDIR]
# Environment: SEQPOINT_BUILD (default build), ITERATIONS (default 300), RUNS (space-separated
# "style:ranks", default all six).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
out="${1:-$(mktemp -d /tmp/seqpoint-ddp.XXXXXX)}"
iters="${ITERATIONS:-300}"
mkdir -p "$out"
[ "$(id -u)" = 0 ] || { echo "ddp_runs: eBPF probes need root: run with sudo" >&2; exit 1; }
for b in "$build/agent/daemon/seqpointd" "$build/agent/cli/seqpoint"; do
  [ -x "$b" ] || { echo "ddp_runs: $b missing: build first (cmake --build $build)" >&2; exit 1; }
done
RUNS="${RUNS:-torchrun:2 slurm:2 mpi:2 torchrun:4 slurm:4 mpi:4}"
printf '[collectors]\nperf.events = ["task-clock"]\n' > "$out/seqpointd.toml"
export SEQPOINT_CONTROL_SOCKET="$out/run/control.sock"
seqpoint="$build/agent/cli/seqpoint"
"$build/agent/daemon/seqpointd" --config "$out/seqpointd.toml" --state-dir "$out/state" \
  --runtime-dir "$out/run" --metrics-listen 127.0.0.1:0 2>"$out/seqpointd.log" &
daemon=$!
cleanup() { kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do "$seqpoint" status >/dev/null 2>&1 && break; sleep 0.1; done

echo "| launcher | ranks | steps | run key | measured steps | time err | covered | task-clock vs ranks' CPU | covered |"
echo "|---|---|---|---|---|---|---|---|---|"
n=0
for spec in $RUNS; do
  IFS=: read -r style ranks <<<"$spec"
  n=$((n + 1))
  job="bench-$$-$n"
  /usr/bin/python3 "$root/examples/launch_ddp.py" --ranks "$ranks" --style "$style" \
    --job-id "$job" -- /usr/bin/python3 "$root/examples/train_torch.py" --ddp \
    --iterations "$iters" --hidden 32 --seed "$n" --trace "$out/$job.rank{rank}.csv" \
    >"$out/$job.log" 2>&1 || { echo "ddp_runs: job failed, see $out/$job.log" >&2; exit 1; }
  sleep 2
  key="$("$seqpoint" runs --all --json | python3 -c '
import json, sys
job = sys.argv[1]
print(next(r["key"] for r in json.load(sys.stdin)["runs"] if job in r["key"]))' "$job")"
  "$seqpoint" show "$key" --json >"$out/$job.show.json"
  python3 - "$out/$job.show.json" "$out" "$job" "$ranks" "$style" "$key" <<'PY'
import csv, glob, json, sys
show_path, out, job, ranks, style, key = sys.argv[1:]
show = json.load(open(show_path))
run = show["run"]
spans, cpu = {}, 0.0
for path in sorted(glob.glob("%s/%s.rank*.csv" % (out, job))):
    for r in csv.DictReader(l for l in open(path) if not l.startswith("#")):
        i = int(r["iter"])
        if i < run["unobserved"]:
            continue
        b, e = float(r["mono_begin_ns"]), float(r["mono_end_ns"])
        lo, hi = spans.get(i, (b, e))
        spans[i] = (min(lo, b), max(hi, e))
        cpu += float(r["cpu_ns"])
step_time = sum(e - b for b, e in spans.values())
p = show["projections"]
def err(q, actual):
    return "%+.2f%%" % (100.0 * (q["total"] - actual) / actual)
def cov(q, actual):
    hi = q["high"] if q["high"] is not None else float("inf")
    return "yes" if q["low"] <= actual <= hi else "no"
measured = sum(len(x["iters"]) for x in show["seqpoints"])
tc = p.get("perf:task-clock")
cells = [style, ranks, str(run["iterations"]), key, str(measured), err(p["time_ns"], step_time),
         cov(p["time_ns"], step_time)]
cells += [err(tc, cpu), cov(tc, cpu)] if tc else ["-", "-"]
print("| " + " | ".join(cells) + " |")
PY
done
echo "files in $out"
