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
# Step 7's check (prove_windows.py) on the bundled seqpointd's own `seqpoint status --json` and
# /metrics: here nothing is measured on a GPU, so every outcome is 0, status and /metrics agree,
# and the GPU run's condition (closed_at_sync > 0) is reported as failed, not passed.
mkdir "$work/good" && tar -C "$work/good" --strip-components=1 -xzf "$tarball"
# Private: no pinned probes, and no process of the tests beside it watched.
printf '[probes]\npin_dir = ""\n[runs]\nonly_key = "bench-gpu-prove-test-watches-nothing"\n' \
  > "$work/seqpointd.toml"
export SEQPOINT_CONTROL_SOCKET="$work/run/control.sock"
"$work/good/bin/seqpointd" --config "$work/seqpointd.toml" --state-dir "$work/state" \
  --runtime-dir "$work/run" --metrics-listen 127.0.0.1:0 2>"$work/seqpointd.log" &
daemon=$!
trap 'kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 300); do "$work/good/bin/seqpoint" status >/dev/null 2>&1 && break; sleep 0.1; done
"$work/good/bin/seqpoint" status --json > "$work/status.json" ||
  { cat "$work/seqpointd.log"; echo "FAIL: the bundled seqpointd did not answer status"; exit 1; }
listen=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics_listen"])' "$work/status.json")
python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=30).read().decode())' \
  "$listen" > "$work/metrics.txt" || { echo "FAIL: no /metrics at $listen"; exit 1; }
none=$(python3 "$src/bench/gpu/prove_windows.py" "$work/status.json" "$work/metrics.txt" --expect-none)
rc=$?
echo "$none"
[ "$rc" = 0 ] && grep -q "every outcome counted, status = /metrics: PASS" <<<"$none" &&
  grep -q "not_closed  *status  *0  */metrics  *0" <<<"$none" ||
  { echo "FAIL: prove_windows.py on an idle daemon (rc $rc)"; exit 1; }
gpu=$(python3 "$src/bench/gpu/prove_windows.py" "$work/status.json" "$work/metrics.txt")
[ $? = 1 ] && grep -q "closed_at_sync > 0 .*: FAIL" <<<"$gpu" ||
  { echo "FAIL: closed_at_sync = 0 was not reported as a failed check: $gpu"; exit 1; }
echo "PASS: prove.sh runs up to the GPU steps and stops there; its window check reads status and /metrics"
