#!/usr/bin/env bash
# Data-parallel runs live: a private seqpointd watches real gloo DDP jobs of
# examples/train_torch.py --ddp, started by examples/launch_ddp.py with the environment of
# torchrun, srun (Slurm) and mpirun (Open MPI), 2 and 4 ranks each, and its projections are
# compared with the ranks' own every-iteration measurements (their --trace files):
#   time_ns          projected from the SeqPoints alone vs the steps' time from the ranks' own
#                    CLOCK_MONOTONIC stamps (first rank's begin to last rank's end, summed)
#   perf:task-clock  projected vs the ranks' own CPU time, summed over the ranks
#   energy_uj        the run's energy vs the node's over its steps: the script plays the GPU
#                    firmware (the real RX 6900 XT gpu_metrics table in a scratch sysfs, its
#                    accumulator advanced at WATTS every ~1 ms), so the node's energy over any
#                    window is WATTS x its length; each device counted once, a step never
#                    divided by the rank count (the baseline, 1/ranks, is what the old
#                    per-rank split gave). Per measured step: step energy / (WATTS x step time).
# Needs root (eBPF), python3-torch and a build. Usage: bench/ddp_runs.sh [OUTDIR]
# Environment: SEQPOINT_BUILD (default build), ITERATIONS (default 300), RUNS (space-separated
# "style:ranks", default all six), WATTS (default 300).
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
watts="${WATTS:-300}"
# The firmware: card0's gpu_metrics table, rewritten whole (rename) every ~1 ms with the
# accumulator (byte 24, 2^-16 J counts) at watts x elapsed time; its worst update lag is written
# to firmware.lag (the bound on any one reading's error is watts x that lag).
sys="$out/sys"
mkdir -p "$sys/class/drm/card0/device"
/usr/bin/python3 - "$root/tests/data/gpu_metrics/amdgpu-sysfs-rs_rx6900xt.bin" \
  "$sys/class/drm/card0/device/gpu_metrics" "$watts" "$out/firmware.lag" <<'PY' &
import os, struct, sys, time
blob, path, watts, lagfile = open(sys.argv[1], "rb").read(), sys.argv[2], float(sys.argv[3]), sys.argv[4]
base = struct.unpack_from("<Q", blob, 24)[0]
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # keep time under load
except OSError:
    pass
t0 = prev = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
lag = 0
while True:
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    b = bytearray(blob)
    struct.pack_into("<Q", b, 24, base + int(watts * (now - t0) * 1e-9 * 65536))
    with open(path + ".tmp", "wb") as f:
        f.write(b)
    os.rename(path + ".tmp", path)
    done = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    if done - prev > lag:
        lag = done - prev
        with open(lagfile, "w") as f:
            f.write(str(lag))
    prev = now
    time.sleep(0.001)
PY
firmware=$!
for _ in $(seq 100); do [ -f "$sys/class/drm/card0/device/gpu_metrics" ] && break; sleep 0.05; done
printf '[runs]\nenergy_sample_interval_ms = 10\n[collectors]\nperf.events = ["task-clock"]\nsysfs_root = "%s"\n[collectors.energy]\nsources = ["gpu_metrics"]\n' \
  "$sys" > "$out/seqpointd.toml"
export SEQPOINT_CONTROL_SOCKET="$out/run/control.sock"
seqpoint="$build/agent/cli/seqpoint"
"$build/agent/daemon/seqpointd" --config "$out/seqpointd.toml" --state-dir "$out/state" \
  --runtime-dir "$out/run" --metrics-listen 127.0.0.1:0 2>"$out/seqpointd.log" &
daemon=$!
cleanup() {
  kill -TERM "$daemon" "$firmware" 2>/dev/null || true
  wait "$daemon" "$firmware" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 100); do "$seqpoint" status >/dev/null 2>&1 && break; sleep 0.1; done

echo "| launcher | ranks | steps | run key | measured steps | time err | covered | task-clock vs ranks' CPU | covered | run energy / node's over its steps (1/ranks before) | measured steps: step / node's energy, median [min, max] |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
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
  "$seqpoint" report "$key" --json >"$out/$job.report.json"
  python3 - "$out/$job.show.json" "$out" "$job" "$ranks" "$style" "$key" "$watts" <<'PY'
import csv, glob, json, sys
show_path, out, job, ranks, style, key, watts = sys.argv[1:]
watts = float(watts)
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
# Energy: the run's, against the node's over the steps the probes timed (WATTS x time), and per
# measured step (its energy and time rows in the report).
# (Steps without energy, shared with another run or uncovered, lower the ratio: it is 1 only
# when every step has its energy.)
e, t = p.get("energy_uj"), p["time_ns"]
cells.append("x%.4f" % (e["actual"] / (watts * t["actual"] * 1e-3)) if e and t["actual"] else "-")
rows = {}
for m in json.load(open("%s/%s.report.json" % (out, job))).get("measurements", []):
    rows.setdefault(m["iter"], {})[m["metric"]] = m["value"]
ratios = sorted(r["energy_uj"] / (watts * r["time_ns"] * 1e-3) for r in rows.values()
                if r.get("energy_uj") and r.get("time_ns"))
cells.append("x%.3f [%.3f, %.3f], %d steps" % (ratios[len(ratios) // 2], ratios[0], ratios[-1],
                                               len(ratios)) if ratios else "-")
print("| " + " | ".join(cells) + " |")
PY
done
echo "firmware's worst update lag: $(( $(cat "$out/firmware.lag" 2>/dev/null || echo 0) / 1000 )) us (x $watts W: each step end's error bound)"
echo "files in $out"
