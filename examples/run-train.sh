#!/usr/bin/env bash
# Runs seqpoint-train with the thread and allocator settings that make CPU timings steady:
#   OPENBLAS_NUM_THREADS / OMP_NUM_THREADS = --threads (default: the CPU count), so that
#     OpenBLAS's and libgomp's pools match libtorch's and do not oversubscribe the cores;
#   OMP_WAIT_POLICY=PASSIVE: idle OpenMP workers sleep instead of spinning, which on a small
#     machine otherwise steals the core the next BLAS call needs;
#   GLIBC_TUNABLES: no mmap for large blocks and no trimming, so the activations of every
#     iteration reuse heap memory instead of faulting in fresh pages (page faults then track
#     real growth, not malloc's policy).
# BLAS: Debian's libtorch links libblas.so.3, which the alternatives system points at
# /usr/lib/x86_64-linux-gnu/openblas-pthread/ once libopenblas0-pthread is installed (priority
# 100 over the reference BLAS's 10). If the reference BLAS is selected on this host, we put the
# openblas-pthread directory first on LD_LIBRARY_PATH. SEQPOINT_TRAIN=/path/to/binary overrides
# where the binary is looked for.
set -euo pipefail

threads=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --threads) threads="${args[$((i + 1))]:-}" ;;
    --threads=*) threads="${args[$i]#--threads=}" ;;
  esac
done
[ -n "$threads" ] || threads="$(nproc)"

export OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" OMP_WAIT_POLICY=PASSIVE
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736

openblas_dir=/usr/lib/x86_64-linux-gnu/openblas-pthread
blas="$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)"
if [ -d "$openblas_dir" ] && [ "${blas#"$openblas_dir"}" = "$blas" ]; then
  export LD_LIBRARY_PATH="$openblas_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${SEQPOINT_TRAIN:-}"
if [ -z "$bin" ]; then
  for candidate in "$here/seqpoint-train" "$here/../build/examples/seqpoint-train" \
                   "$here/../build-examples/examples/seqpoint-train"; do
    if [ -x "$candidate" ]; then bin="$candidate"; break; fi
  done
fi
if [ -z "$bin" ]; then
  echo "run-train.sh: seqpoint-train not found next to this script or in build*/examples;" \
       "build it (cmake --build BUILD --target seqpoint-train) or set SEQPOINT_TRAIN" >&2
  exit 1
fi
exec "$bin" "$@"
