#!/usr/bin/env bash
# The fleet view live (issue 23): NODES seqpointd instances on this machine, each with its own
# node name (SEQPOINT_NODE_NAME), state, runtime dir and /metrics port, each watching one real
# PyTorch trainer (examples/train_torch.py, marked with seqpoint_probe; runs.only_key keeps each
# agent to its own node's trainer), all scraped by one real Prometheus (localhost only) with
# packaging/prometheus/seqpoint-fleet-rules.yml loaded. The trainers are one fleet job
# (SEQPOINT_JOB_NAME): the same training on every node.
#
# Every trainer runs under a CPU quota (cgroup v1 cpu or v2 cpu.max) of QUOTA of a CPU, so the
# nodes are equal and a slowdown is exact: node 1's quota is cut to QUOTA/(1+s) for SLOW_S
# seconds at s = 10%, 20%, 50% (SLOWDOWNS), with HEALTHY_S seconds at the full quota before
# each. Measured from Prometheus's own alert state, polled every second:
#   found after   seconds from the quota cut to SeqpointNodeSlowerThanPeers firing for node 1
#   false alerts  firings (or pending) for any other node, over the whole run
#   index         node 1's seqpoint_fleet:node_index:ratio at the end of the slow phase, and the
#                 healthy nodes' largest index over the run (the noise the threshold must clear)
# and the slowdown each phase really made, from node 1's own trace (iteration time per SL
# against the other nodes', over the phase).
# With DDP_SLOW=F (e.g. 1.2), one more agent (node d1) watches a 4-rank gloo DDP job
# (bench/fleet/ddp_straggler_job.py, all ranks under one cgroup of DDP_QUOTA CPUs) whose rank 2
# computes F times as slow from step 100 on, so the straggler panels and alerts have a subject.
# At the end the dashboard's queries are run on this Prometheus and drawn into OUTDIR/dashboard/
# (packaging/grafana/render_fleet_dashboard.py; a PNG through headless chromium when installed).
# Needs root (eBPF, cgroups), prometheus (Debian's package) and a build.
# Usage: bench/fleet/run.sh [OUTDIR]   Environment: SEQPOINT_BUILD (default build), NODES (4),
# QUOTA (0.2), HEALTHY_S (90), SLOW_S (120), SLOWDOWNS ("10 20 50"), DDP_SLOW (off),
# DDP_QUOTA (0.8).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SEQPOINT_BUILD:-$root/build}"
out="${1:-$(mktemp -d /tmp/seqpoint-fleet.XXXXXX)}"
NODES="${NODES:-4}" QUOTA="${QUOTA:-0.2}" HEALTHY_S="${HEALTHY_S:-90}" SLOW_S="${SLOW_S:-120}"
SLOWDOWNS="${SLOWDOWNS:-10 20 50}" DDP_SLOW="${DDP_SLOW:-}" DDP_QUOTA="${DDP_QUOTA:-0.8}"
mkdir -p "$out"
[ "$(id -u)" = 0 ] || { echo "fleet: eBPF probes and cgroups need root: run with sudo" >&2; exit 1; }
command -v prometheus >/dev/null || { echo "fleet: prometheus missing: apt install prometheus" >&2; exit 1; }
[ -x "$build/agent/daemon/seqpointd" ] || { echo "fleet: build first ($build)" >&2; exit 1; }

# --- cgroups: one per trainer, v2 (cpu.max) or v1 (cpu.cfs_quota_us) ------------------------
period=100000
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cg_root=/sys/fs/cgroup/seqpoint-fleet-$$
  mkdir -p "$cg_root"; echo +cpu > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
  set_quota() { echo "$2 $period" > "$cg_root/n$1/cpu.max"; }
elif [ -d /sys/fs/cgroup/cpu ]; then
  cg_root=/sys/fs/cgroup/cpu/seqpoint-fleet-$$
  mkdir -p "$cg_root"
  set_quota() { echo "$period" > "$cg_root/n$1/cpu.cfs_period_us"; echo "$2" > "$cg_root/n$1/cpu.cfs_quota_us"; }
else
  echo "fleet: no cgroup cpu controller here" >&2; exit 1
fi
full=$(python3 -c "print(int($QUOTA * $period))")

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for i in $(seq "$NODES") ddp; do rmdir "$cg_root/n$i" 2>/dev/null || true; done
  rmdir "$cg_root" 2>/dev/null || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
targets=""
for i in $(seq "$NODES"); do
  d="$out/n$i"; mkdir -p "$d"
  port=$(free_port)
  printf '[runs]\nonly_key = "fleet-%s-n%s"\n[probes]\npin_dir = ""\n[collectors]\nperf.events = ["task-clock"]\n' \
    "$$" "$i" > "$d/seqpointd.toml"
  SEQPOINT_NODE_NAME="n$i" "$build/agent/daemon/seqpointd" --config "$d/seqpointd.toml" \
    --state-dir "$d/state" --runtime-dir "$d/run" --metrics-listen "127.0.0.1:$port" \
    2>"$d/seqpointd.log" &
  pids+=($!)
  targets+="'127.0.0.1:$port',"
done
if [ -n "$DDP_SLOW" ]; then
  d="$out/d1"; mkdir -p "$d"
  port=$(free_port)
  printf '[runs]\nonly_key = "torchrun:fleet-%s-ddp"\n[probes]\npin_dir = ""\n' "$$" > "$d/seqpointd.toml"
  SEQPOINT_NODE_NAME=d1 "$build/agent/daemon/seqpointd" --config "$d/seqpointd.toml" \
    --state-dir "$d/state" --runtime-dir "$d/run" --metrics-listen "127.0.0.1:$port" \
    2>"$d/seqpointd.log" &
  pids+=($!)
  targets+="'127.0.0.1:$port',"
fi
prom_port=$(free_port)
cat > "$out/prometheus.yml" <<YML
global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: ['$root/packaging/prometheus/seqpoint-fleet-rules.yml']
scrape_configs:
  - job_name: seqpoint
    static_configs: [{targets: [${targets%,}]}]
YML
prometheus --config.file "$out/prometheus.yml" --storage.tsdb.path "$out/tsdb" \
  --web.listen-address "127.0.0.1:$prom_port" >"$out/prometheus.log" 2>&1 &
pids+=($!)
sleep 3

for i in $(seq "$NODES"); do
  mkdir -p "$cg_root/n$i"; set_quota "$i" "$full"
  # The cgroup first, then exec: the trainer never runs outside its quota.
  sh -c "echo \$\$ > $cg_root/n$i/cgroup.procs 2>/dev/null || echo \$\$ > $cg_root/n$i/tasks;
         exec env SEQPOINT_RUN_ID=fleet-$$-n$i SEQPOINT_JOB_NAME=fleet-bench /usr/bin/python3 \
         $root/examples/train_torch.py --iterations 1000000 --seed $i --trace $out/n$i/trace.csv" \
    >"$out/n$i/trainer.log" 2>&1 &
  pids+=($!)
done

if [ -n "$DDP_SLOW" ]; then
  mkdir -p "$cg_root/nddp"
  ddp_full=$(python3 -c "print(int($DDP_QUOTA * $period))")
  if [ -f "$cg_root/nddp/cpu.max" ]; then echo "$ddp_full $period" > "$cg_root/nddp/cpu.max"
  else echo "$period" > "$cg_root/nddp/cpu.cfs_period_us"; echo "$ddp_full" > "$cg_root/nddp/cpu.cfs_quota_us"; fi
  sh -c "echo \$\$ > $cg_root/nddp/cgroup.procs 2>/dev/null || echo \$\$ > $cg_root/nddp/tasks;
         exec env TORCHELASTIC_RUN_ID=fleet-$$-ddp PYTHONPATH=$build/sdk/python /usr/bin/python3 \
         $root/bench/fleet/ddp_straggler_job.py --no-wait --ranks 4 --steps 1000000 \
         --slow-rank 2 --slow-factor $DDP_SLOW --slow-from 100 --trace-dir $out/d1/trace" \
    >"$out/d1/job.log" 2>&1 &
  pids+=($!)
fi

# Prometheus's alerts, polled every second into alerts.log: "<unix time> <state> <node>".
poll() {
  python3 - "$prom_port" "$out/alerts.log" "$out/index.log" "$out/rank_alerts.log" <<'PY' &
import json, sys, time, urllib.request
port, alerts, index = sys.argv[1], open(sys.argv[2], "a"), open(sys.argv[3], "a")
ranks = open(sys.argv[4], "a")
def get(path):
    with urllib.request.urlopen("http://127.0.0.1:%s%s" % (port, path), timeout=2) as r:
        return json.load(r)["data"]
while True:
    now = time.time()
    try:
        for a in get("/api/v1/alerts")["alerts"]:
            if a["labels"].get("alertname") == "SeqpointNodeSlowerThanPeers":
                alerts.write("%.1f %s %s\n" % (now, a["state"], a["labels"].get("node")))
            if a["labels"].get("alertname") == "SeqpointRankSlowerThanPeers":
                ranks.write("%.1f %s %s %s\n" % (now, a["state"], a["labels"].get("node"),
                                                  a["labels"].get("rank")))
        for r in get("/api/v1/query?query=seqpoint_fleet:node_index:ratio")["result"]:
            index.write("%.1f %s %s\n" % (now, r["metric"].get("node"), r["value"][1]))
    except Exception as e:  # Prometheus still starting: nothing to record yet
        pass
    alerts.flush(); index.flush(); ranks.flush()
    time.sleep(max(0, 1 - (time.time() - now)))
PY
  pids+=($!)
}
poll
echo "# phases: <start unix> <end unix> <slowdown %>" > "$out/phases.log"
for s in $SLOWDOWNS; do
  sleep "$HEALTHY_S"
  t0=$(date +%s.%N)
  set_quota 1 "$(python3 -c "print(int($full / (1 + $s / 100)))")"
  sleep "$SLOW_S"
  set_quota 1 "$full"
  echo "$t0 $(date +%s.%N) $s" >> "$out/phases.log"
done
sleep 5
echo "dashboard queries on this Prometheus:"
python3 "$root/packaging/grafana/check_fleet_dashboard.py" --prometheus "http://127.0.0.1:$prom_port" || true
minutes=$(python3 -c "print(($(date +%s) - $(head -c 10 "$out/index.log" 2>/dev/null || date +%s)) / 60 + 1)")
python3 "$root/packaging/grafana/render_fleet_dashboard.py" --prometheus "http://127.0.0.1:$prom_port" \
  --out "$out/dashboard" --minutes "$minutes" $(command -v chromium >/dev/null && echo --screenshot) || true
python3 "$root/bench/fleet/summarize.py" "$out" "$NODES"
