#!/usr/bin/env bash
# The main job, on a fresh Debian 12 machine, as root: installs the dependencies, builds the
# agent and the example trainer, starts seqpointd, trains a real libtorch translation model
# under it, and prints the live SeqPoint projection of the run beside the totals measured on
# every iteration. Usage: scripts/demo.sh [ITERATIONS]   (default 400)
set -euo pipefail
case "${1:-}" in
  -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export SEQPOINT_BUILD="${SEQPOINT_BUILD:-$PWD/build}"
if [ ! -f "$SEQPOINT_BUILD/build.ninja" ]; then
  cmake -S . -B "$SEQPOINT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
exec agent/daemon/demo.sh "$@"
