#!/usr/bin/env bash
# The live false-alarm rate of the slow-rank test under load (issue 23; docs/fleet.md): healthy
# PyTorch DDP jobs (gloo on the CPU, bench/fleet/ddp_straggler_job.py, equal ranks, length-bucketed)
# each watched by a private seqpointd, with and without a CPU hog (a busy shell loop) beside them;
# every alarm classified by the ranks' own clocks (real: slower by at least the floor; near: by at
# least half of it; false: named, not slower). The test binary's "slow rank false alarm bench" case
# does the work (agent/fleet/slow_rank_false_alarm_bench.cpp: its columns). About 4-5 minutes at
# the defaults on 2 loaded cores. Needs root (eBPF) and python3-torch.
# Usage: bench/fleet/slow_rank_false_alarms.sh [OUT.csv]
# Environment: SEQPOINT_BUILD (default build), JOBS (3 per hog setting), HOGS (0,1), RANKS (2),
# STEPS (500 judged steps a job).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
out="${1:-$(mktemp /tmp/seqpoint-slow-rank-false-alarms.XXXXXX.csv)}"
[ "$(id -u)" = 0 ] || { echo "slow_rank_false_alarms: eBPF probes need root: run with sudo" >&2; exit 1; }
SEQPOINT_SOURCE_DIR="$root" SEQPOINT_BINARY_DIR="$build" SEQPOINT_SLOW_RANK_FALSE_ALARM_BENCH="$out" \
  "$build/agent/fleet/agent_fleet_slow_rank_ddp_e2e_test" -tc="slow rank false alarm bench*" >/dev/null
cut -d, -f1-13 "$out" | column -s, -t
# Totals per hog setting: rank-steps, alarms by class, and the rate of false ones per tested
# rank-step with its 95% upper bound (rule of three when none).
awk -F, 'NR > 1 { n[$1]++; rs[$1] += $4; t[$1] += $5; a[$1] += $6; r[$1] += $7; ne[$1] += $8; f[$1] += $9; rp[$1] += $10 }
  END { for (h in n) printf "hog %s: %d jobs, %d rank-steps (%d tested), %d alarms: %d real, %d near, %d false (%d raised by the replay on the own clocks too); false per tested rank-step %s\n",
        h, n[h], rs[h], t[h], a[h], r[h], ne[h], f[h], rp[h],
        (f[h] == 0 ? sprintf("< %.1e (95%%)", 3 / (t[h] > 0 ? t[h] : 1)) : sprintf("%.1e", f[h] / t[h])) }' "$out"
echo "(figures in $out; the detail column names each alarm: rank@step:x own clock)"
