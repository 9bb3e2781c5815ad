#!/usr/bin/env bash
# Straggling ranks named, and why (issue 23): a real 4-rank PyTorch DDP job over gloo on the CPU
# (bench/fleet/ddp_straggler_job.py), with the iteration probes and the collective probes
# attached and agent/fleet/straggler.h judging every step. Sweep: no straggler (how often an
# equal rank is called one by chance), rank 2 sleeping SLOW_MS inside its forward pass (a slow
# rank at the same SL), rank 1 fed sequences LONG_FACTOR times as long (data imbalance). Per
# run: steps judged, steps naming the expected rank with the expected cause, with the other
# cause, naming another rank, and the median lag (as a share of the other ranks' compute
# before the collective). The test binary's "fleet straggler bench" case does the work.
# Over steps, the sequential test (agent/fleet/slow_rank.h): runs of 2 x SLOW_FROM steps, rank 2
# F times as slow from step SLOW_FROM on (F = 1: the false alarms of an unslowed run); found_steps
# and found_s: its first alarm on rank 2 after the change, false_alarms: on any other rank or before.
# Needs root (eBPF) and python3-torch. Usage: bench/fleet/stragglers.sh [OUT.csv]
# Environment: SEQPOINT_BUILD (default build), STEPS (60), SLOW_FROM (100), and filters:
# SCENARIOS (none,slow_ms,long_factor,unslowed,slow_factor), FACTORS (1,1.1,1.2,1.5),
# BATCHING (random,bucketed). The 10% detection delay on a longer run:
#   SLOW_FROM=300 SCENARIOS=unslowed,slow_factor FACTORS=1,1.1 bench/fleet/stragglers.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
out="${1:-$(mktemp /tmp/seqpoint-stragglers.XXXXXX.csv)}"
[ "$(id -u)" = 0 ] || { echo "stragglers: eBPF probes need root: run with sudo" >&2; exit 1; }
for v in SCENARIOS FACTORS BATCHING; do
  if [ -n "${!v:-}" ]; then export "SEQPOINT_STRAGGLER_$v=${!v}"; fi
done
SEQPOINT_SOURCE_DIR="$root" SEQPOINT_STRAGGLER_BENCH="$out" SEQPOINT_STRAGGLER_STEPS="${STEPS:-60}" \
  SEQPOINT_STRAGGLER_SLOW_FROM="${SLOW_FROM:-100}" \
  "$build/agent/fleet/agent_fleet_straggler_ddp_test" -tc="fleet straggler bench*" >/dev/null
column -s, -t "$out"
echo "(figures in $out)"
