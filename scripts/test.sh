#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs every test:
#   scripts/setup.sh (apt packages) -> configure + build (build/) -> ctest -> bounded fuzzing.
# Environment: BUILD_DIR (default build), FUZZ_SECONDS (default 20 per target; 0 skips),
#              SEQPOINT_CMAKE_ARGS (extra configure arguments, e.g. -DSEQPOINT_SANITIZE=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
start=$(date +%s)

bash scripts/setup.sh
# Optimised as released, without debug info for C++: it compiles about a quarter faster (the
# whole of this script then fits CI's 30 minutes on 2 cores); crash stacks still name functions.
# The tests' own sources build at -O1 (SEQPOINT_TEST_OPTIMIZE, cmake/SeqpointTesting.cmake).
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG" -DSEQPOINT_WERROR=ON ${SEQPOINT_CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$(nproc)"
echo "test.sh: built in $(( $(date +%s) - start )) s"
if ! ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 600; then
  echo "test.sh: tests failed (above, with their output); fuzzing skipped. Re-run the failed" \
       "ones with: ctest --test-dir $BUILD_DIR --rerun-failed --output-on-failure" >&2
  exit 1
fi
echo "test.sh: ctest done at $(( $(date +%s) - start )) s"
if [ "$FUZZ_SECONDS" != 0 ] && [ -x fuzz/run-fuzzers.sh ]; then
  fuzz/run-fuzzers.sh "$FUZZ_SECONDS"
fi
echo "test.sh: all done in $(( $(date +%s) - start )) s"
