#!/bin/bash
# ctest gpu_sync_watch: seqpoint-syncwatch on a real process calling the real libcudart (no GPU
# needed: each sync is entered and returns an error at once). Three windows each followed by a
# cudaStreamSynchronize ~50 ms later are closed by it; a fourth whose next sync comes 1.3 s
# later (past the 1 s bound) is "window not closed by a sync". Skips (77) without root or the
# CUDA 13 runtime.
set -uo pipefail
build=${1:?usage: sync_watch_test.sh BUILD_DIR}
cudart=${SEQPOINT_CUDA_LIB_DIR:-/usr/local/cuda/lib64}/libcudart.so.13
[ "$(id -u)" = 0 ] || { echo "SKIP: the sync probes need root"; exit 77; }
[ -r "$cudart" ] || { echo "SKIP: $cudart is absent (no CUDA 13 toolkit)"; exit 77; }
work=$(mktemp -d)
wl=""; rec=""
trap '[ -n "$wl" ] && kill $wl 2>/dev/null; [ -n "$rec" ] && kill $rec 2>/dev/null; rm -rf "$work"' EXIT
mkfifo "$work/in"
"$build/probes/sync_workload" "$cudart" < "$work/in" > "$work/out" & wl=$!
exec 3>"$work/in"
for _ in $(seq 100); do grep -q ready "$work/out" && break; sleep 0.05; done
"$build/bench/seqpoint-syncwatch" record "$wl" "$work/syncs.csv" 2>"$work/rec.err" & rec=$!
echo load >&3
for _ in $(seq 200); do grep -q "probed" "$work/rec.err" && break; sleep 0.05; done
grep -q "probed" "$work/rec.err" || { cat "$work/rec.err"; echo "FAIL: syncwatch did not attach"; exit 1; }
for gap in 0.05 0.05 0.05 1.3; do
  echo now >&3; sleep "$gap"; echo sync >&3; sleep 0.1
done
echo exit >&3; exec 3>&-
wait "$wl"; wl=""
wait "$rec"; rec=""
{ echo "iter,end_mono_ns"; awk '/^now/{n++; print n "," $2}' "$work/out"; } > "$work/windows.csv"
out=$("$build/bench/seqpoint-syncwatch" classify "$work/syncs.csv" "$work/windows.csv")
echo "$out"
[ "$(grep -c 'closed by a sync (the next one)' <<<"$out")" = 3 ] || { echo "FAIL: 3 windows closed by the next sync expected"; exit 1; }
grep -q "window iter 4: window not closed by a sync: no CUDA/HIP sync within 1000 ms" <<<"$out" || { echo "FAIL: window 4 should not be closed"; exit 1; }
echo "PASS: windows closed by the real process's next cudaStreamSynchronize, the late one flagged"
