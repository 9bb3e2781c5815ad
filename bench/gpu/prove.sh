#!/usr/bin/env bash
# The agent on a real NVIDIA GPU, in one command, for a machine that has the GPU, its driver,
# PyTorch (with CUDA) and nothing else of ours: no build, no package registry.
#
#   bench/gpu/prove.sh [--bundle seqpoint-*.tar.gz] [--seconds-per-sl S] [--long-seconds-per-sl L]
#                                                                              (as root)
#
# 1. unpacks the bundle (packaging/bundle.sh; default: the newest bench/gpu/seqpoint-*.tar.gz,
#    else one made from ./build) into a temporary directory;
# 2. checks the kernel's eBPF features the probes need and says what is missing;
# 3. finds the GPU, or stops there: "no NVIDIA GPU: stopping before the GPU steps" (exit 3);
# 4. starts the bundled seqpointd (state in the temporary directory) with the cudnn9-rnn preset;
# 5. trains for real on CUDA (bench/gpu/train_gpu.py): a GRU encoder-decoder through cuDNN with no
#    change to its code (zero-code), then a small transformer marked with the Python module,
#    each in fixed-SL phases of S seconds (default 15: about 2 x 4 x 15 s of training), then the
#    transformer again with 200 micro-batches per iteration (2-4 s each: GPM needs windows of
#    2 s or more), 2 SLs x L seconds (default 30);
# 6. prints, per run: iterations seen against the trainer's and SLs exact; which GPU the run was
#    measured on (UUID) against the trainer's own; GPM values per SeqPoint beside NVML's; every
#    projection against the trainer's own CUDA-event-timed iterations and NVML energy; per
#    measured window whether a CUDA sync closed it (collectors/gpu/sync_window.h, from the syncs
#    seqpoint-syncwatch recorded beside the trainer), and that over every trainer iteration;
# 7. checks the GPU window rule as the daemon applied it (bench/gpu/prove_windows.py): every
#    outcome of seqpoint_gpu_windows_total{outcome} in /metrics equal to `seqpoint status`'s
#    gpu_windows (the left-out ones, not_closed first, counted), and closed_at_sync > 0 (the
#    zero-code GRU ends its iterations before loss.item(): only its next sync can close them);
#    prints the summary and PASS or FAIL.
# Finishes in under 8 minutes (each step has a deadline). Exit: 0 done and the checks of 7
# passed, 1 failure (of a step or of those checks), 2 usage, 3 no NVIDIA GPU (everything
# before the GPU steps ran).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bundle=""
per_sl=15
long_per_sl=30
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle=${2:?--bundle needs a file}; shift 2 ;;
    --seconds-per-sl) per_sl=${2:?}; shift 2 ;;
    --long-seconds-per-sl) long_per_sl=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "prove: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
t0=$(date +%s)
say() { printf 'prove [%3ds] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
work=$(mktemp -d /tmp/seqpoint-prove.XXXXXX)
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

# 1. The bundle.
if [ -z "$bundle" ]; then
  bundle=$(ls -t "$here"/seqpoint-*.tar.gz 2>/dev/null | head -1 || true)
fi
if [ -z "$bundle" ] && [ -x "$root/build/agent/daemon/seqpointd" ]; then
  say "no bundle given: making one from $root/build"
  bundle=$("$root/packaging/bundle.sh" "$root/build" "$work" | tail -1)
fi
[ -n "$bundle" ] && [ -f "$bundle" ] || {
  echo "prove: no bundle: pass --bundle FILE (made by packaging/bundle.sh) or put one in $here" >&2; exit 2; }
mkdir -p "$work/agent"
tar -C "$work/agent" --strip-components=1 -xzf "$bundle"
agent=$work/agent
(cd "$agent" && sha256sum --quiet -c MANIFEST) || { echo "prove: $bundle is damaged (MANIFEST)" >&2; exit 1; }
say "bundle $(basename "$bundle") unpacked in $agent"

# 2. eBPF features the probes need (probes/README.md).
missing=0
check() {
  local what=$1 cond=$2 why=$3
  if eval "$cond"; then say "ebpf ok: $what"; else say "ebpf MISSING: $what ($why)"; missing=$((missing + 1)); fi
}
kver=$(uname -r | sed 's/^\([0-9]*\)\.\([0-9]*\).*/\1 \2/')
check "root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN)" '[ "$(id -u)" = 0 ]' "run with sudo"
check "kernel >= 5.15 (BPF cookies, ring buffers)" \
  'set -- $kver; [ "$1" -gt 5 ] || { [ "$1" -eq 5 ] && [ "$2" -ge 15 ]; }' "kernel $(uname -r)"
check "kernel BTF /sys/kernel/btf/vmlinux" '[ -r /sys/kernel/btf/vmlinux ]' \
  "a kernel built with CONFIG_DEBUG_INFO_BTF"
# bpffs is optional: without it the probes work and are not kept across daemon restarts.
if grep -q " /sys/fs/bpf bpf " /proc/mounts; then say "ebpf ok: bpffs at /sys/fs/bpf"; else
  say "ebpf note: no bpffs at /sys/fs/bpf: probes are not kept across daemon restarts (optional; mount -t bpf bpf /sys/fs/bpf)"; fi
check "kernel lockdown not confidentiality" \
  '! grep -q "\[confidentiality\]" /sys/kernel/security/lockdown 2>/dev/null' \
  "lockdown=confidentiality forbids the probes' user-memory reads"
[ "$missing" = 0 ] || say "$missing eBPF feature(s) missing: iterations cannot be probed here"

# 3. The GPU.
gpu=""
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  gpu=$(nvidia-smi -L | head -1)
elif ls /proc/driver/nvidia/gpus/* >/dev/null 2>&1; then
  gpu="NVIDIA GPU at $(ls /proc/driver/nvidia/gpus | head -1)"
fi
cuda=$(python3 -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
if [ -z "$gpu" ] || [ "$cuda" != 1 ]; then
  say "no NVIDIA GPU: stopping before the GPU steps (driver: ${gpu:-none}; torch.cuda: $cuda)"
  exit 3
fi
[ "$missing" = 0 ] || { say "stopping: the eBPF features above are missing"; exit 1; }
say "GPU: $gpu"

# 4. seqpointd, private to this proof.
cat > "$work/seqpointd.toml" <<TOML
[probes]
zero_code = ["cudnn9-rnn"]
[runs]
budget_per_doubling = 16
TOML
export SEQPOINT_CONTROL_SOCKET="$work/run/control.sock"
sp="$agent/bin/seqpoint"
"$agent/bin/seqpointd" --config "$work/seqpointd.toml" --state-dir "$work/state" \
  --runtime-dir "$work/run" --metrics-listen 127.0.0.1:0 2>"$work/seqpointd.log" &
daemon=$!
for _ in $(seq 100); do "$sp" status >/dev/null 2>&1 && break; sleep 0.1; done
"$sp" status >/dev/null || { cat "$work/seqpointd.log"; echo "prove: seqpointd did not start" >&2; exit 1; }
say "seqpointd running (pid $daemon)"

# 5. Training, each model under a deadline (the whole proof stays under 8 minutes). Beside each
#    trainer, seqpoint-syncwatch (when the bundle has it) records the trainer's CUDA syncs. A third
#    run, transformer-long, accumulates 200 micro-batches per iteration (seconds each) so that GPM,
#    which needs windows of 2 s or more, is measured per SeqPoint.
budget=$(( 4 * per_sl + 2 * long_per_sl + 60 ))
watch="$agent/bin/seqpoint-syncwatch"
models="gru transformer transformer-long"
for model in $models; do
  args=(--seconds-per-sl "$per_sl")
  [ "$model" = transformer-long ] && args=(--seconds-per-sl "$long_per_sl" --sls 64,256 --micro-batches 200)
  say "training $model on CUDA: ${args[*]}"
  SEQPOINT_RUN_ID="prove-$model" PYTHONPATH="$agent/python" \
    timeout "$budget" python3 "$here/train_gpu.py" "${model%-long}" --out "$work/$model.csv" \
    "${args[@]}" > "$work/$model.log" 2>&1 &
  trainer=$!
  # `timeout` forks the trainer: the recorder watches the python process, not timeout.
  py=""
  for _ in $(seq 50); do py=$(pgrep -P "$trainer" -n python3 || true); [ -n "$py" ] && break; sleep 0.1; done
  recorder=""
  if [ -x "$watch" ] && [ -n "$py" ]; then
    "$watch" record "$py" "$work/$model.syncs.csv" 2>"$work/$model.syncwatch.log" &
    recorder=$!
  fi
  wait "$trainer" || { tail -20 "$work/$model.log"; echo "prove: the $model trainer failed" >&2; exit 1; }
  [ -z "$recorder" ] || wait "$recorder" || say "$model: syncwatch failed: $(tail -1 "$work/$model.syncwatch.log")"
done
sleep 2  # the daemon's last poll

# 6. What the agent saw against what the trainers measured themselves.
"$sp" runs --all --json > "$work/runs.json"
for model in $models; do
  run=$(python3 -c 'import json,sys
runs = json.load(open(sys.argv[1])).get("runs", [])
m = [r for r in runs if r.get("key") == sys.argv[2]]
print((m or [{}])[-1].get("id", ""))' "$work/runs.json" "prove-$model")
  if [ -z "$run" ]; then say "$model: NO RUN seen by the agent (see $work/seqpointd.log)"; continue; fi
  "$sp" show "$run" --json > "$work/$model.show.json"
  "$sp" report "$run" --json > "$work/$model.report.json" 2>/dev/null || echo '{}' > "$work/$model.report.json"
  sync="$work/$model.sync.txt"
  if [ -x "$watch" ] && [ -s "$work/$model.syncs.csv" ]; then
    "$watch" classify "$work/$model.syncs.csv" "$work/$model.csv" > "$sync" || : > "$sync"
  else
    echo "   sync-closed windows: not measured (no seqpoint-syncwatch in this bundle, or it saw no sync)" > "$sync"
  fi
  python3 "$here/prove_report.py" "$model" "$work/$model.csv" "$work/$model.show.json" \
    "$work/$model.report.json" "$sync"
done
# 7. The GPU window rule as the daemon applied it: `seqpoint status` beside /metrics.
"$sp" status --json > "$work/status.json"
listen=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("metrics_listen", ""))' \
  "$work/status.json")
python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=10).read().decode())' \
  "$listen" > "$work/metrics.txt" || say "could not read http://$listen/metrics"
windows=0
python3 "$here/prove_windows.py" "$work/status.json" "$work/metrics.txt" || windows=1
say "done in $(( $(date +%s) - t0 )) s"
[ "$windows" = 0 ] || { echo "prove: the GPU window checks failed (see above)" >&2; exit 1; }
