#!/usr/bin/env bash
# `seqpoint select` on a 10^8-row trace (about 2.3 GB): wall time and peak memory, offline (two
# streaming passes) and online (one pass), against `wc -l` over the same file as the baseline
# cost of just reading it. Usage: bench/trace_scale.sh [ROWS] [BUILD_DIR]
set -euo pipefail
ROWS=${1:-100000000}
BUILD=${2:-build}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$BUILD/bench/trace_gen" "$ROWS" "$TMP/big.csv"
ls -la "$TMP/big.csv"
t() { /usr/bin/time -f "%e s wall, %M KiB max RSS" "$@"; }
echo "baseline: wc -l"; t wc -l "$TMP/big.csv"
echo "select offline --budget $((ROWS / 200))"
t "$BUILD/agent/cli/seqpoint" select --trace "$TMP/big.csv" --budget $((ROWS / 200)) --progress --json --out "$TMP/sel.json"
echo "select --online --budget-fraction 0.005"
t "$BUILD/agent/cli/seqpoint" select --trace "$TMP/big.csv" --online --budget-fraction 0.005 --json --out "$TMP/sel2.json"
echo "project (reads only the SeqPoints' rows' metrics)"
t "$BUILD/agent/cli/seqpoint" project --selection "$TMP/sel.json" --measured "$TMP/big.csv"
