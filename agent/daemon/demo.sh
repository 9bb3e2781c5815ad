#!/usr/bin/env bash
# The agent on this machine, end to end: builds what is missing, starts seqpointd (state and
# socket in a temporary directory), runs the real libtorch trainer from examples/ under it, and
# prints the live projection of the whole run next to the actual totals measured on every
# iteration, then the run as `seqpoint show` sees it.
#
#   agent/daemon/demo.sh [ITERATIONS]          (default 400; needs root for the eBPF probes)
#
# Environment: SEQPOINT_BUILD (build directory, default build), THREADS (trainer threads,
# default 2), CORPUS (default the Debian catalogs corpus), PER_DOUBLING (measurements per
# doubling of the run, seqpointd's default 16).
set -euo pipefail

case "${1:-}" in
  -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
iterations="${1:-400}"
case "$iterations" in
  ''|*[!0-9]*) echo "demo: ITERATIONS must be a positive integer, got '$iterations'" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
threads="${THREADS:-2}"
if [ "$(id -u)" -ne 0 ]; then
  echo "demo: seqpointd attaches eBPF probes, which needs root: run it with sudo" >&2
  exit 1
fi
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
echo "demo: building seqpointd, seqpoint and seqpoint-train in $build (libtorch takes minutes the first time)"
# Progress: every 20th build step, and the last (a first build is ~300 steps, minutes each way).
cmake --build "$build" --target seqpointd seqpoint seqpoint-train seqpoint_example_corpora \
  -j "$(nproc)" 2>&1 | awk '/^\[[0-9]+\/[0-9]+\]/ { n++; last = $1; if (n % 20 == 1) print "demo: build step " $1 }
                           /error:|FAILED/ { print; failed = 1 }
                           END { if (last != "") print "demo: build step " last " (done)"; exit failed }' ||
  { echo "demo: the build failed (above)" >&2; exit 1; }
corpus="${CORPUS:-$build/examples/corpora/ende_debian_catalogs.tsv}"

work="$(mktemp -d /tmp/seqpoint-demo.XXXXXX)"
# seqpointd's default selection: the budget is spread over the run (16 per doubling of it), the
# warm-up (libtorch's first iterations run 30-50% slower) is found from the iterations' times
# and projected as its own stratum, and changes of cost start strata of their own.
# PERF_EVENTS: the perf events the SeqPoints measure. The default is software events only,
# because this kind of VM traps every PMU access: with hardware counters enabled, each of the
# trainer's ~600 context switches per iteration takes a trap, and the measured iterations
# run tens of percent slower than the others (the self-check shows it). On bare metal, add
# "cycles", "instructions", "cache-misses".
run="demo-$$"
# only_key: this private daemon watches its own trainer, not other people's jobs on the node.
printf '[runs]\nbudget_per_doubling = %s\nonly_key = "%s"\n[collectors]\nperf.events = [%s]\n' \
  "${PER_DOUBLING:-16}" "$run" \
  "${PERF_EVENTS:-\"task-clock\", \"page-faults\", \"context-switches\", \"cpu-migrations\"}" \
  > "$work/seqpointd.toml"
export SEQPOINT_CONTROL_SOCKET="$work/run/control.sock"
seqpoint="$build/agent/cli/seqpoint"
"$build/agent/daemon/seqpointd" --config "$work/seqpointd.toml" --state-dir "$work/state" \
  --runtime-dir "$work/run" --metrics-listen 127.0.0.1:0 2>"$work/seqpointd.log" &
daemon=$!
cleanup() { kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do "$seqpoint" status >/dev/null 2>&1 && break; sleep 0.1; done
"$seqpoint" status

echo
echo "demo: training $iterations iterations (run $run); live projection of the whole run:"
SEQPOINT_RUN_ID="$run" SEQPOINT_TRAIN="$build/examples/seqpoint-train" \
  "$root/examples/run-train.sh" --corpus "$corpus" --iterations "$iterations" --threads "$threads" \
  --trace "$work/trace.csv" --log-every 100000 >"$work/train.log" 2>&1 &
trainer=$!
cat > "$work/live.py" <<'PY'
import json, sys
s = json.load(sys.stdin)
r, c = s["run"], s.get("self_check")
n = sum(len(p["iters"]) for p in s["seqpoints"])
if not c:
    print("  %6d iterations, %3d measured: no projection yet" % (r["iterations"], n))
else:
    print("  %6d iterations, %3d measured | time projected from SeqPoints %8.2f s [%.2f, %.2f]"
          " | measured on every iteration %8.2f s | error %+6.2f%%"
          % (r["iterations"], n, c["projected"] / 1e9, c["low"] / 1e9, c["high"] / 1e9,
             c["actual"] / 1e9, 100 * c["error"]))
PY
live() { "$seqpoint" show "$run" --json 2>/dev/null | python3 "$work/live.py" 2>/dev/null || true; }
while kill -0 "$trainer" 2>/dev/null; do live; sleep 2; done
wait "$trainer" || { echo "demo: the trainer failed:" >&2; cat "$work/train.log" >&2; exit 1; }
sleep 1
echo
"$seqpoint" show "$run"
echo
echo "demo: the trainer's own totals over every iteration (its --trace), for comparison:"
awk -F, '/^#/ {next} !h {for (i = 1; i <= NF; i++) col[i] = $i; h = 1; next}
         {for (i = 6; i <= NF; i++) s[i] += $i} END {for (i = 6; i in s; i++) printf "  %-18s %.6g\n", col[i], s[i]}' "$work/trace.csv"
echo "demo: files in $work (seqpointd.log, state/state.db, trace.csv)"
