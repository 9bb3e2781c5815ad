#!/usr/bin/env bash
# seqpointd's cost on a node whose watched training processes are idle: N processes (default
# 64) marked with the SDK's USDT probes each run one iteration (so each has a run) and then wait;
# the daemon's CPU (utime + stime, all threads) and wake-ups (voluntary context
# switches of all its threads: its own sleeps) are read from /proc over WINDOW_S seconds once SETTLE_S passed.
# Needs root (eBPF). Compare two builds in the same session, alternating:
#
#   bench/idle_watch.sh [N] [WINDOW_S]                     (this build's seqpointd)
#   SEQPOINTD=/path/to/older/seqpointd bench/idle_watch.sh  (another one, same workload)
#
# Prints one line: processes, seconds, CPU ms per second (= tenths of a percent of a core),
# wake-ups per second.
set -euo pipefail

n="${1:-64}"
window="${2:-20}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
seqpointd="${SEQPOINTD:-$build/agent/daemon/seqpointd}"
workload="$build/probes/testing/usdt_workload"
# probes/ may be split into subfolders: the test workload is wherever the build put it.
[ -x "$workload" ] || workload="$(find "$build/probes" -name usdt_workload -type f -perm -u+x 2>/dev/null | head -n1)"
[ "$(id -u)" -eq 0 ] || { echo "idle_watch.sh: needs root (eBPF probes)" >&2; exit 77; }
for b in "$seqpointd" "$workload"; do
  [ -x "$b" ] || { echo "idle_watch.sh: no $b: build seqpointd and usdt_workload" >&2; exit 1; }
done
out="$(mktemp -d /tmp/seqpoint-idle-watch.XXXXXX)"
pids=()
daemon=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait "${pids[@]}" 2>/dev/null || true
  if [ -n "$daemon" ]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  [ -n "${KEEP:-}" ] && echo "idle_watch.sh: kept $out" >&2 || rm -rf "$out"
}
trap cleanup EXIT

ticks() {  # utime + stime of every thread, in clock ticks
  awk '{ s += $14 + $15 } END { print s }' /proc/"$1"/task/*/stat
}
switches() {  # voluntary context switches of every thread (its own sleeps and wake-ups; involuntary ones
  # come from other load)
  cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/ { s += $2 } END { print s }'
}

printf '[runs]\nbudget = 8\n%b' "${EXTRA_RUNS_TOML:-}" > "$out/seqpointd.toml"
"$seqpointd" --config "$out/seqpointd.toml" --state-dir "$out/state" --runtime-dir "$out/run" \
  2>"$out/seqpointd.log" &
daemon=$!
sleep "${START_S:-3}"  # BPF load and the start-up checks
mkfifo "$out/hold"
exec 3<>"$out/hold"  # a writer that never writes: the workloads wait on it
for _ in $(seq "$n"); do
  # One iteration, then it holds (stdin open, nothing written): an idle, watched process.
  "$workload" --iters 1 --hold <"$out/hold" >/dev/null 2>&1 &
  pids+=("$!")
done
sleep "${SETTLE_S:-20}"  # every process attached (slow on a loaded machine)
hz=$(getconf CLK_TCK)
c0=$(ticks "$daemon"); w0=$(switches "$daemon"); t0=$(date +%s%N)
sleep "$window"
c1=$(ticks "$daemon"); w1=$(switches "$daemon"); t1=$(date +%s%N)
attached=$(grep -c "attached\|found" "$out/seqpointd.log" || true)
awk -v n="$n" -v c="$((c1 - c0))" -v w="$((w1 - w0))" -v t="$((t1 - t0))" -v hz="$hz" \
  -v seen="$attached" 'BEGIN {
    s = t / 1e9
    printf "idle_watch: %d processes, %.1f s: CPU %.2f ms/s (%.3f%% of a core), %.1f wake-ups/s (log lines attached/found: %d)\n",
           n, s, c * 1000 / hz / s, c * 100 / hz / s, w / s, seen }'
