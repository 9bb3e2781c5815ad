#!/bin/bash
# ctest bench_gpu_prove: bench/gpu/prove.sh on a machine without an NVIDIA GPU runs everything
# before the GPU steps (bundle unpacked and verified, eBPF features checked) and stops there,
# saying so, with exit status 3. On a machine with a GPU it skips (run prove.sh itself there).
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: prove_test.sh BUILD_DIR}
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: an NVIDIA GPU is here: run bench/gpu/prove.sh itself"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball=$("$src/packaging/bundle.sh" "$build" "$work" | tail -1) || { echo "FAIL: bundle.sh"; exit 1; }
out=$(bash "$src/bench/gpu/prove.sh" --bundle "$tarball" 2>&1)
rc=$?
echo "$out"
[ "$rc" = 3 ] || { echo "FAIL: prove.sh exited $rc, not 3 (no GPU)"; exit 1; }
grep -q "no NVIDIA GPU: stopping before the GPU steps" <<<"$out" || { echo "FAIL: no stop message"; exit 1; }
grep -q "bundle seqpoint-.*unpacked" <<<"$out" || { echo "FAIL: bundle not unpacked"; exit 1; }
grep -q "ebpf ok: kernel BTF\|ebpf MISSING: kernel BTF" <<<"$out" || { echo "FAIL: no eBPF check"; exit 1; }
# A damaged bundle is refused by name.
mkdir "$work/bad" && tar -C "$work/bad" -xzf "$tarball"
dir=$(ls "$work/bad")
echo garbage >> "$work/bad/$dir/libexec/seqpoint"
tar -C "$work/bad" -czf "$work/bad.tar.gz" "$dir"
bad=$(bash "$src/bench/gpu/prove.sh" --bundle "$work/bad.tar.gz" 2>&1)
[ $? = 1 ] && grep -q "is damaged" <<<"$bad" || { echo "FAIL: a damaged bundle was not refused: $bad"; exit 1; }
echo "PASS: prove.sh runs up to the GPU steps and stops there"
