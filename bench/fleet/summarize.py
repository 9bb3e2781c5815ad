#!/usr/bin/env python3
"""Summarises a bench/fleet/run.sh output directory: per slowdown phase of node n1, when
Prometheus fired SeqpointNodeSlowerThanPeers for it, its index; over the whole run, the alerts on
healthy nodes and their largest index. Usage: summarize.py OUTDIR NODES"""
import re
import statistics
import sys


def read(path):
    try:
        with open(path) as f:
            return [l.split() for l in f if l.strip() and not l.startswith("#")]
    except FileNotFoundError:
        return []


def main():
    out = sys.argv[1]
    phases = [(float(a), float(b), int(s)) for a, b, s in read(out + "/phases.log")]
    alerts = [(float(t), state, node) for t, state, node in read(out + "/alerts.log")]
    index = [(float(t), node, float(v)) for t, node, v in read(out + "/index.log")]
    if not index:
        print("fleet: Prometheus recorded no index (no fleet series scraped?): see %s" % out)
        return 1
    start = index[0][0]
    # A phase's alert may come after the quota was restored; the next phase starts later.
    grace = 60.0
    print("| slowdown (quota cut) | found after | index of the slow node (last 30 s) | pending after |")
    print("|---|---|---|---|")
    for t0, t1, s in phases:
        firing = [t for t, st, n in alerts if n == "n1" and st == "firing" and t0 <= t <= t1 + grace]
        pending = [t for t, st, n in alerts if n == "n1" and t0 <= t <= t1 + grace]
        idx = [v for t, n, v in index if n == "n1" and t1 - 30 <= t <= t1]
        print("| %d%% | %s | %s | %s |" % (
            s, "%.0f s" % (firing[0] - t0) if firing else "not found",
            "%.3f" % statistics.median(idx) if idx else "-",
            "%.0f s" % (pending[0] - t0) if pending else "-"))
    def in_slow(t):
        return any(t0 <= t <= t1 + grace for t0, t1, _ in phases)
    healthy_alerts = sorted({(n, st) for t, st, n in alerts if n != "n1"})
    n1_false = [t for t, st, n in alerts if n == "n1" and st == "firing" and not in_slow(t)]
    settled = [v for t, n, v in index if n != "n1" and t > start + 60]
    n1_healthy = [v for t, n, v in index if n == "n1" and t > start + 60 and not in_slow(t)]
    print()
    print("healthy nodes: alerts %s; index max %.3f, min %.3f, median %.3f over %d samples" % (
        "none" if not healthy_alerts else ", ".join("%s %s" % a for a in healthy_alerts),
        max(settled or [0]), min(settled or [0]),
        statistics.median(settled) if settled else 0, len(settled)))
    print("slow node outside its slow phases (+%.0f s): %d firing samples; index max %.3f" % (
        grace, len(n1_false), max(n1_healthy or [0])))
    rank_summary(out)
    return 0


def rank_summary(out):
    """The DDP job's slow rank (DDP_SLOW): SeqpointRankSlowerThanPeers against the slowdown's
    start, which the job logged ("slowdown F from step N at UNIX")."""
    try:
        log = open(out + "/d1/job.log").read()
    except FileNotFoundError:
        return
    m = re.search(r"slowdown (\S+) from step (\d+) at (\S+)", log)
    alerts = [(float(t), st, node, rank) for t, st, node, rank in read(out + "/rank_alerts.log")]
    if not m:
        print("ddp: the slowdown never began (see %s/d1/job.log)" % out)
        return
    t0 = float(m.group(3))
    firing = [t for t, st, _, rank in alerts if st == "firing" and rank == "2" and t >= t0]
    false = sorted({(rank, st) for t, st, _, rank in alerts if rank != "2" or t < t0})
    print("ddp rank 2 slowed %sx: SeqpointRankSlowerThanPeers firing after %s; other alerts: %s" % (
        m.group(1), "%.0f s" % (firing[0] - t0) if firing else "never",
        "none" if not false else ", ".join("rank %s %s" % f for f in false)))


if __name__ == "__main__":
    sys.exit(main())
