#!/usr/bin/env bash
# Steps a live seqpointd takes to name a slowed rank of a real 2-rank PyTorch DDP job (gloo on the
# CPU, bench/fleet/ddp_straggler_job.py, length-bucketed), beside the detection floor it stated
# before the slowdown, with and without a CPU hog beside the job (issue 23; docs/fleet.md). Rank 1
# computes F times as long from step SLOW_FROM on; show is polled every 250 ms. The test binary's
# "slow rank live bench" case does the work (agent/fleet/slow_rank_live_bench.cpp: its columns).
# Needs root (eBPF) and python3-torch. Usage: bench/fleet/slow_rank_live.sh [OUT.csv]
# Environment: SEQPOINT_BUILD (default build), FACTORS (1.1,1.25,1.5), HOGS (0,1), REPS (1),
# SLOW_FROM (150), AFTER (300).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
out="${1:-$(mktemp /tmp/seqpoint-slow-rank-live.XXXXXX.csv)}"
[ "$(id -u)" = 0 ] || { echo "slow_rank_live: eBPF probes need root: run with sudo" >&2; exit 1; }
SEQPOINT_SOURCE_DIR="$root" SEQPOINT_BINARY_DIR="$build" SEQPOINT_SLOW_RANK_LIVE_BENCH="$out" \
  "$build/agent/fleet/agent_fleet_slow_rank_ddp_e2e_test" -tc="slow rank live bench*" >/dev/null
column -s, -t "$out"
echo "(figures in $out)"
