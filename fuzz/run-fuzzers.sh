#!/usr/bin/env bash
# Builds every libFuzzer target of fuzz/CMakeLists.txt in a separate build directory (clang, the
# whole tree coverage-instrumented with ASan+UBSan) and runs each for SECONDS (default 60).
# Fails on the first crash, sanitizer report, leak or timeout; the reproducer is left in
# $BUILD_DIR/fuzz/<target>-crash-*. Prints each target's execution count.
# Usage: fuzz/run-fuzzers.sh [SECONDS]
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_JOBS (build parallelism, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${FUZZ_JOBS:-2}
mkdir -p "$BUILD_DIR"

CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSEQPOINT_FUZZ=ON -DSEQPOINT_SANITIZE=ON -DSEQPOINT_BUILD_TESTS=OFF \
  -DSEQPOINT_BUILD_BENCH=OFF -DSEQPOINT_WITH_TORCH=OFF -DSEQPOINT_WITH_EBPF=OFF \
  -DSEQPOINT_WITH_PAPI=OFF -DSEQPOINT_WITH_ROCM_SMI=OFF \
  "-DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link" "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link" \
  > "$BUILD_DIR/configure.log" 2>&1 || { cat "$BUILD_DIR/configure.log"; exit 1; }

manifest="$BUILD_DIR/fuzz/fuzzers.txt"
mapfile -t targets < <(cut -f1 "$manifest")
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"

summary=()
while IFS=$'\t' read -r name seeds dict; do
  [ -n "$name" ] || continue
  work="$BUILD_DIR/fuzz/corpus-work/$name"
  mkdir -p "$work"
  args=(-max_total_time="$SECONDS_PER_TARGET" -max_len=8192 -timeout=10 -rss_limit_mb=2048
        -print_final_stats=1 -artifact_prefix="$BUILD_DIR/fuzz/$name-")
  if [ -n "$dict" ]; then args+=(-dict="$dict"); fi
  log="$BUILD_DIR/fuzz/$name.log"
  echo "run-fuzzers: $name for ${SECONDS_PER_TARGET}s"
  # shellcheck disable=SC2086  # seeds is a space-separated list of directories
  if ! "$BUILD_DIR/fuzz/$name" "${args[@]}" "$work" $seeds > "$log" 2>&1; then
    tail -n 60 "$log"
    echo "run-fuzzers: $name FAILED (log: $log)" >&2
    exit 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  summary+=("$name: ${execs:-?} executions in ${SECONDS_PER_TARGET}s, no crash")
done < "$manifest"
printf 'run-fuzzers: %s\n' "${summary[@]}"
