#!/usr/bin/env bash
# Straggling ranks named, and why (issue 23): a real 4-rank PyTorch DDP job over gloo on the CPU
# (bench/fleet/ddp_straggler_job.py), with the iteration probes and the collective probes
# attached and agent/fleet/straggler.h judging every step. Sweep: no straggler (how often an
# equal rank is called one by chance), rank 2 sleeping SLOW_MS inside its forward pass (a slow
# rank at the same SL), rank 1 fed sequences LONG_FACTOR times as long (data imbalance). Per
# run: steps judged, steps naming the expected rank with the expected cause, with the other
# cause, naming another rank, and the median lag (as a share of the other ranks' compute
# before the collective). The test binary's "fleet straggler bench" case does the work.
# Needs root (eBPF) and python3-torch. Usage: bench/fleet/stragglers.sh [OUT.csv]
# Environment: SEQPOINT_BUILD (default build), STEPS (60).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
out="${1:-$(mktemp /tmp/seqpoint-stragglers.XXXXXX.csv)}"
[ "$(id -u)" = 0 ] || { echo "stragglers: eBPF probes need root: run with sudo" >&2; exit 1; }
SEQPOINT_SOURCE_DIR="$root" SEQPOINT_STRAGGLER_BENCH="$out" SEQPOINT_STRAGGLER_STEPS="${STEPS:-60}" \
  "$build/agent/fleet/agent_fleet_straggler_ddp_test" -tc="fleet straggler bench*" >/dev/null
column -s, -t "$out"
echo "(figures in $out)"
