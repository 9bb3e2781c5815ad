#!/usr/bin/env python3
"""Report generation time and page size for a 10^6-iteration run (issue: report --html).

Usage: bench/report_scale.py [--seqpoint build/agent/cli/seqpoint] [--repeats 20]

Builds a `seqpoint report --json` answer with a 10^6-iteration run's shape from the recorded
fixture (tests/data/report/gru_debian_1500.json): 500 histogram SLs, 42 SeqPoints of 6
measured iterations x 4 metrics (the budget bounds measurements, not the run's length), 30
days of history of 8 bins. Then times `seqpoint report --from-json F --html out.html` and
prints the median wall time and the page's size. Aim: < 1 s, < 2 MB.
"""
import argparse
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "data", "report", "gru_debian_1500.json")


def big_report(n=1_000_000):
    rng = random.Random(1)
    r = json.load(open(FIXTURE))
    sls = list(range(2, 1002, 2))
    w = [2.718 ** (-((s - 300) / 200) ** 2) for s in sls]
    counts = [max(1, int(n * x / sum(w))) for x in w]
    cost = lambda s: 2e7 + 4e5 * s  # noqa: E731
    r["histogram"] = [{"count": c, "energy_uj_mean": None, "seq_len": s,
                       "time_ns_mean": cost(s) * rng.uniform(0.97, 1.03)}
                      for s, c in zip(sls, counts)]
    bins = [(sls[i], sls[min(i + 11, len(sls) - 1)]) for i in range(0, 500, 12)]
    metrics = ["time_ns", "task_clock_ns", "page_faults", "context_switches"]
    points, meas = [], []
    for lo, hi in bins:
        iters = sorted(rng.sample(range(n), 6))
        sl = rng.randrange(lo, hi + 1, 2)
        points.append({"bin": [lo, hi], "iter": iters[0], "iters": iters, "pids": [1] * 6,
                       "seq_len": sl, "weight": n / len(bins)})
        for i in iters:
            for m in metrics:
                ns = m.endswith("_ns")
                meas.append({"iter": i, "metric": m, "pid": 1, "seq_len": sl,
                             "unit": "ns" if ns else "count",
                             "value": cost(sl) * rng.uniform(0.9, 1.1) if ns else rng.uniform(10, 100)})
    r["seqpoints"], r["measurements"] = points, meas
    day0 = datetime.date(2026, 10, 27)
    r["history"] = [{"bin": [lo, hi], "day": str(day0 + datetime.timedelta(d)),
                     "mean": cost((lo + hi) / 2) * rng.uniform(0.95, 1.05), "metric": "time_ns",
                     "n": 1000} for d in range(30) for lo, hi in bins[8:16]]
    r["run"]["iterations"], r["run"]["max_iter"] = n, n - 1
    return r, len(meas)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seqpoint", default=os.path.join(ROOT, "build", "agent", "cli", "seqpoint"))
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    if not os.access(args.seqpoint, os.X_OK):
        sys.exit(f"report_scale: {args.seqpoint} is not an executable; build first")
    report, rows = big_report()
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "big.json"), os.path.join(d, "out.html")
        json.dump(report, open(src, "w"))
        walls = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            subprocess.run([args.seqpoint, "report", "--from-json", src, "--html", out],
                           check=True, capture_output=True)
            walls.append(time.perf_counter() - t0)
        size = os.path.getsize(out)
    print(f"10^6-iteration report ({len(report['histogram'])} SLs, {rows} measurement rows, "
          f"{len(report['history'])} history rows): median {statistics.median(walls) * 1e3:.1f} ms "
          f"over {args.repeats} runs, page {size / 1024:.0f} KiB (aim: < 1 s, < 2 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
