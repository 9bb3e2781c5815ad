#!/usr/bin/env bash
# What seqpointd costs a node, measured in one run (the figures of README.md "What it costs a
# node"). Root; uses the built seqpointd and header from BUILD_DIR, its own state directory,
# and leaves nothing behind.
#
#   packaging/measure-node-cost.sh [BUILD_DIR] [SECONDS] [JOBS]     (defaults: build 60 2)
#
# 1. idle: the agent alone for SECONDS/2: CPU and resident memory.
# 2. busy: JOBS marker loops (a C++ job on the installed-style header; one iteration = BEGIN,
#    ~2 ms of sleep, END) for SECONDS: the agent's CPU per iteration it processed, its memory,
#    and the state database's size.
# 3. in the job: back-to-back markers timed before the agent starts and after it has attached,
#    in one process: what the markers cost a training process per iteration.
# The agent watches every process of the node: other training jobs running meanwhile add to
# its CPU (the script counts only its own iterations). Timing noise on a shared VM is several
# percent: repeat and compare medians.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "measure-node-cost: needs root (eBPF attach)" >&2; exit 1; }
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
seconds=${2:-60}
jobs=${3:-2}
daemon=$build/agent/daemon/seqpointd
cli=$build/agent/cli/seqpoint
[ -x "$daemon" ] && [ -x "$cli" ] || { echo "measure-node-cost: build seqpointd and seqpoint in $build" >&2; exit 1; }

work=$(mktemp -d /tmp/seqpoint-cost.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cat > "$work/job.cpp" <<'CPP'
// Marker loop. argv[1] = "paced": ~2 ms per iteration, forever. "tight": back-to-back
// iterations; every ~100 ms prints "<unix time> <ns per iteration>", forever.
#include <seqpoint/usdt.h>
#include <time.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
static double Now(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char** argv) {
  bool tight = argc > 1 && std::strcmp(argv[1], "tight") == 0;
  uint64_t i = 0;
  for (;;) {
    double t0 = Now(CLOCK_MONOTONIC);
    uint64_t n = 0;
    do {
      for (int k = 0; k < (tight ? 10000 : 1); ++k, ++i, ++n) {
        uint32_t sl = 16 + (i * 53) % 496;
        SEQPOINT_ITERATION_BEGIN(i, sl, 16, sl * 12);
        if (!tight) usleep(2000);
        SEQPOINT_ITERATION_END(i);
      }
    } while (tight && Now(CLOCK_MONOTONIC) - t0 < 0.1);
    if (tight) {
      std::printf("%.3f %.2f\n", Now(CLOCK_REALTIME), (Now(CLOCK_MONOTONIC) - t0) * 1e9 / n);
      std::fflush(stdout);
    }
  }
}
CPP
g++ -O2 -I"$src/sdk/include" "$work/job.cpp" -o "$work/job"

start_daemon() {
  "$daemon" --config /dev/null --state-dir "$work/state" --runtime-dir "$work/run" \
    --metrics-listen "" --log-level warn >> "$work/daemon.log" 2>&1 &
  dpid=$!
  pids+=("$dpid")
  until [ -S "$work/run/control.sock" ]; do
    kill -0 "$dpid" 2>/dev/null || { cat "$work/daemon.log"; exit 1; }
    sleep 0.2
  done
}
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$dpid/stat"; }
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$dpid/status"; }
iterations() {
  "$cli" runs --all --json --socket "$work/run/control.sock" |
    python3 -c 'import json,sys; print(sum(r["iterations"] for r in json.load(sys.stdin)["runs"]
                                           if r["key"].startswith("cost-")))'
}

# 1. idle
start_daemon
sleep 2
idle=$((seconds / 2))
c0=$(cpu_s)
sleep "$idle"
c1=$(cpu_s)
python3 -c "print('idle:  CPU %.3f %% of one core over $idle s, RSS $(rss_kib) KiB' % \
  (($c1 - $c0) / $idle * 100))"

# 2. busy
for n in $(seq "$jobs"); do
  SEQPOINT_RUN_ID=cost-$n "$work/job" paced > /dev/null &
  pids+=($!)
done
sleep 10  # discovery, attach and warm-up are not what is measured
c0=$(cpu_s) n0=$(iterations) t0=$(date +%s.%N)
sleep "$seconds"
c1=$(cpu_s) n1=$(iterations) t1=$(date +%s.%N)
python3 - "$c0" "$c1" "$n0" "$n1" "$t0" "$t1" "$jobs" <<'PY'
import sys
c0, c1, n0, n1, t0, t1, jobs = map(float, sys.argv[1:])
it = n1 - n0
print("busy:  %d jobs, %.0f iterations/s seen; CPU %.3f %% of one core, %.1f us per iteration"
      % (jobs, it / (t1 - t0), (c1 - c0) / (t1 - t0) * 100, (c1 - c0) / max(it, 1) * 1e6))
PY
echo "busy:  RSS $(rss_kib) KiB (peak $(awk '/^VmHWM/ { print $2 }' "/proc/$dpid/status") KiB)," \
     "state.db $(du -k "$work/state/state.db" | cut -f1) KiB"
kill "$dpid"
wait "$dpid" 2>/dev/null || true

# 3. in the job: blocks before the agent starts, then blocks once it has attached.
SEQPOINT_RUN_ID=cost-tight "$work/job" tight > "$work/tight.txt" &
pids+=($!)
sleep 5
agent_start=$(date +%s.%N)
start_daemon
sleep 15
python3 - "$work/tight.txt" "$agent_start" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
start = float(sys.argv[2])
off = [ns for t, ns in rows if t < start]
on = [ns for t, ns in rows if t > start + 8]  # discovery (2 s) and attach are done by then
m_off, m_on = statistics.median(off), statistics.median(on)
print("job:   markers of one iteration (BEGIN+END): %.1f ns unattached (median of %d blocks), "
      "%.1f ns attached (median of %d): +%.2f us per iteration"
      % (m_off, len(off), m_on, len(on), (m_on - m_off) / 1e3))
PY
