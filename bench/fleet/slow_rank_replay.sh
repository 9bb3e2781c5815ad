#!/usr/bin/env bash
# The slow-rank test (agent/fleet/slow_rank.h) on recorded real DDP runs, replayed (issue 23):
# false alarms per healthy rank-step, and steps and seconds to find a rank slowed 1.1x, 1.2x,
# 1.5x at equal SL. Records each run with bench/fleet/ddp_straggler_job.py alone (4 ranks, gloo
# on the CPU, no agent, no root: each rank writes its own trace), then replays the traces
# through one run's StragglerJoin (agent_fleet_slow_rank_replay_test's bench case), so the same
# recordings can be replayed against two builds of the test. Runs: healthy ones, quiet and with
# HOGS busy loops beside them (a noisy neighbour), and rank 2 slowed F times from step SLOW_FROM.
# Columns: false_before (alarms before the slowdown, or in a healthy run), others_after (on the
# other ranks after it began: on a small host the slowed rank's spin takes CPU from its peers),
# healthy_peak (the largest CUSUM of a healthy rank, as a share of its threshold), found_steps
# and found_s (its first alarm on rank 2 after the change).
# Then the detection floor (slow_rank.h: DetectionFloor) against slowdowns of 1.05x-1.5x injected
# into the healthy recordings of tests/golden/ (agent_fleet_slow_rank_replay_test's floor case):
# per case the floor the rank showed before the slowdown, whether it predicted the slowdown found
# within 100 steps, and the steps the test took (0: not within 100); in OUT-floor.csv.
# Usage: bench/fleet/slow_rank_replay.sh [OUT.csv]
# Environment: SEQPOINT_BUILD (default build), RECORD_DIR (default: a fresh temporary directory;
# an existing one is replayed as it is, not recorded again), STEPS (600), SLOW_FROM (300),
# FACTORS (1.1 1.2 1.5), HOGS (1: busy loops beside the runs with _hog in their names).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
out="${1:-$(mktemp /tmp/seqpoint-slow-rank.XXXXXX.csv)}"
steps="${STEPS:-600}" from="${SLOW_FROM:-300}" factors="${FACTORS:-1.1 1.2 1.5}"
hogs="${HOGS:-1}"
dir="${RECORD_DIR:-}"
record=0
if [ -z "$dir" ]; then
  dir="$(mktemp -d /tmp/seqpoint-slow-rank.XXXXXX)"
  record=1
elif [ ! -d "$dir" ]; then
  mkdir -p "$dir"
  record=1
fi
job=(/usr/bin/python3 "$root/bench/fleet/ddp_straggler_job.py" --ranks 4 --steps "$steps" --no-wait)

# run NAME HOG ARGS...: one recorded run, with HOG busy loops beside it while it lasts.
run() {
  local name=$1 hog=$2 pids=()
  shift 2
  for _ in $(seq "$hog"); do
    (while :; do :; done) &
    pids+=($!)
  done
  "${job[@]}" --trace-dir "$dir/$name" "$@" >"$dir/$name.log" 2>&1 ||
    echo "slow_rank_replay: $name failed: see $dir/$name.log" >&2
  for p in "${pids[@]}"; do kill "$p"; done
  wait 2>/dev/null || true
}

runs=()
seed=1
if [ "$record" = 1 ]; then
  run healthy_quiet 0 --batching random --seed $((seed++))
  run healthy_hog 1 --batching bucketed --seed $((seed++))
  for f in $factors; do
    run "slow${f}_quiet" 0 --batching random --seed $((seed++)) --slow-rank 2 --slow-factor "$f" \
      --slow-from "$from"
    if [ "$hogs" -gt 0 ]; then
      run "slow${f}_hog" "$hogs" --batching bucketed --seed $((seed++)) --slow-rank 2 \
        --slow-factor "$f" --slow-from "$from"
    fi
  done
fi
for d in "$dir"/*/; do
  d="${d%/}"
  case "$(basename "$d")" in
    slow*) runs+=("$d:2:$from") ;;
    *) runs+=("$d") ;;
  esac
done
list="$(IFS=,; echo "${runs[*]}")"
SEQPOINT_SOURCE_DIR="$root" SEQPOINT_SLOW_RANK_BENCH="$out" SEQPOINT_SLOW_RANK_RUNS="$list" \
  "$build/agent/fleet/agent_fleet_slow_rank_replay_test" -tc="fleet slow rank bench*" >/dev/null
column -s, -t "$out"
echo "(figures in $out; recordings in $dir)"
SEQPOINT_SOURCE_DIR="$root" SEQPOINT_SLOW_RANK_FLOOR="${out%.csv}-floor.csv" \
  "$build/agent/fleet/agent_fleet_slow_rank_replay_test" -tc="*detection floor*" -s |
  grep -E 'x: [0-9]+ cases|ranks not slowed' | sed 's/^.*MESSAGE: /floor: /'
echo "(detection floor per case in ${out%.csv}-floor.csv)"
