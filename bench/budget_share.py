#!/usr/bin/env python3
"""The budget by accuracy and overhead (runs.target_error, runs.max_overhead, issue 22): the
measured share of iterations it leaves for runs of 10^3 .. 10^6 iterations, and the accuracy it
buys, on recorded real PyTorch runs.

Usage: bench/budget_share.py [--replay build/bench/budget_share_replay] [--true-numbers DIR ...]
                             [--settings 0,0.05,0.02,0.01] [--seeds 2] [--quick] [--json OUT]
                             [--hold thin|defer] [--lengths 1000,10000]

Every run goes through build/bench/budget_share_replay: seqpointd's online selector with its
defaults (4,096 in all, 16 per doubling, one chosen iteration in 4 a time-only control) and the
whole-run estimator it projects with, at runs.target_error = runs.max_overhead = each setting
(0: off, today's default). Sources: tests/data/online/*.csv and tests/data/agent/*.csv (real
python3-torch and libtorch runs, 1,000-2,000 iterations, every iteration's time and CPU time),
and with --true-numbers the traces of bench/true_numbers.py (300 iterations each; its wall_ns
and cpu_ns columns). Each is stretched to each length with seeded moving blocks (the warm-up
kept, block j drawn near j's scaled place: the shape kept, noise redrawn; blocks repeat, so the
long runs are a little easier than fresh ones), the same seeds for every setting, so settings
are compared run by run.

Per length and setting: the measured share (median and max over runs), the mean |error| of the
time projection (from the measured iterations alone, the self-check) and of the CPU-time
projection (cpu_ns or task_clock_ns, through every iteration's time), each with the mean paired
difference from setting 0 and twice its standard error (the noise floor: a difference inside it
is no difference), and how many 95% intervals cover the actual total. The cost of a measured
iteration is --cost of the mean iteration time (default 0.05: the observer-effect threshold, above
which seqpointd drops the collectors that cost it); --cost 1 is a loop of very short iterations.
--calm 0.1 replays the same runs with a tenth of their noise about each SL's mean (steady runs,
as fixed-shape GPU training is), where the accuracy target can stop a stretch early.
"""
import argparse
import csv
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# perf task-clock first: the libtorch trainer leaves cpu_ns out of some iterations (-1)
CPU = ("task_clock_ns", "cpu_ns")


def true_numbers_traces(dirs, out_dir):
    """bench/true_numbers.py's workload logs (wall_ns, cpu_ns) as trace CSVs (time_ns, cpu_ns)."""
    paths = []
    for d in dirs:
        for src in sorted(glob.glob(os.path.join(d, "*.csv"))):
            if src.endswith(".measured.csv"):
                continue
            with open(src) as f:
                rows = list(csv.DictReader(l for l in f if not l.startswith("#")))
            if rows and "time_ns" in rows[0]:  # the libtorch trainer's: a trace already
                paths.append(src)
                continue
            if not rows or "wall_ns" not in rows[0] or "cpu_ns" not in rows[0]:
                continue
            dst = os.path.join(out_dir, "tn_" + os.path.basename(src))
            with open(dst, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["iter", "seq_len", "time_ns", "cpu_ns"])
                for i, r in enumerate(rows):
                    w.writerow([i, r["seq_len"], r["wall_ns"], r["cpu_ns"]])
            paths.append(dst)
    return paths


def replay(exe, trace, length, seed, setting, cost, calm, knobs, hold="thin"):
    target = setting if knobs in ("both", "target") else 0
    overhead = setting if knobs in ("both", "overhead") else 0
    out = subprocess.run([exe, trace, "--length", str(length), "--seed", str(seed),
                          "--target-error", str(target), "--max-overhead", str(overhead),
                          "--cost", str(cost), "--calm", str(calm), "--hold", hold],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    m = d["metrics"]
    cpu = next((c for c in CPU if c in m), None)
    return {"trace": os.path.basename(trace), "length": d["iterations"], "seed": seed,
            "setting": setting, "measured": d["measured"], "over_budget": d["over_budget"],
            "backstop": d["backstop"], "time_reliable": m["time_ns"]["reliable"],
            "share": d["measured"] / d["iterations"], "half_width": d["stratum_half_width"],
            "time_err": m["time_ns"]["error_pct"], "time_cov": m["time_ns"]["covered"],
            "cpu_err": m[cpu]["error_pct"] if cpu else None,
            "cpu_cov": m[cpu]["covered"] if cpu else None}


def paired(rows, base, key):
    """Mean |err| of rows, and the mean paired difference from base with 2 standard errors."""
    errs = [abs(r[key]) for r in rows if r[key] is not None]
    diffs = [abs(r[key]) - abs(b[key]) for r, b in zip(rows, base) if r[key] is not None]
    if not errs:
        return "-"
    mean = statistics.fmean(errs)
    if len(diffs) < 2:
        return f"{mean:.2f}%"
    d = statistics.fmean(diffs)
    se = statistics.stdev(diffs) / math.sqrt(len(diffs))
    return f"{mean:.2f}% ({d:+.2f} ± {2 * se:.2f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replay", default=os.path.join(ROOT, "build/bench/budget_share_replay"))
    ap.add_argument("--true-numbers", nargs="*", default=[], metavar="DIR")
    ap.add_argument("--settings", default="0,0.05,0.02,0.01")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--cost", type=float, default=0.05)
    ap.add_argument("--calm", type=float, default=1,
                    help="each value moved to this share of its distance from its SL's mean "
                         "(0.1: the runs with a tenth of their noise, steady as fixed-shape GPU "
                         "runs are; 1: as recorded)")
    ap.add_argument("--knobs", choices=("both", "target", "overhead"), default="both",
                    help="which of runs.target_error, runs.max_overhead each setting sets "
                         "(the other 0)")
    ap.add_argument("--hold", choices=("thin", "defer"), default="thin",
                    help="what max_overhead does with a pick it cannot pay for: thin "
                         "(seqpointd's) or defer (the earlier design: the bin's next candidate "
                         "taken later instead), to compare the two")
    ap.add_argument("--lengths", default="",
                    help="comma-separated run lengths (default 10^3 .. 10^6; --quick: .. 10^5)")
    ap.add_argument("--quick", action="store_true", help="runs of 10^3 .. 10^5 only, one seed")
    ap.add_argument("--json", help="also write every run's row here")
    args = ap.parse_args()
    if not os.access(args.replay, os.X_OK):
        sys.exit(f"budget_share: {args.replay} is not an executable; build it first "
                 "(cmake --build build --target budget_share_replay) or pass --replay")
    settings = [float(s) for s in args.settings.split(",")]
    if settings[0] != 0:
        settings.insert(0, 0.0)  # the baseline every setting is compared with, run by run
    lengths = [10**3, 10**4, 10**5] + ([] if args.quick else [10**6])
    if args.lengths:
        lengths = [int(float(n)) for n in args.lengths.split(",")]
    seeds = range(1, 2 if args.quick else args.seeds + 1)
    with tempfile.TemporaryDirectory(prefix="budget_share.") as tmp:
        traces = sorted(glob.glob(os.path.join(ROOT, "tests/data/online/*.csv")) +
                        glob.glob(os.path.join(ROOT, "tests/data/agent/*.csv")))
        traces += true_numbers_traces(args.true_numbers, tmp)
        rows = [replay(args.replay, t, n, s, setting, args.cost, args.calm, args.knobs,
                       args.hold)
                for n in lengths for setting in settings for t in traces for s in seeds]
    print(f"{len(traces)} recorded runs x {len(seeds)} seeds per length; cost of a measured "
          f"iteration {args.cost:g} x the mean iteration time; noise x {args.calm:g}; "
          f"setting applied to {args.knobs}; picks over max_overhead: {args.hold}")
    knob = {"both": "target_error = max_overhead", "target": "target_error",
            "overhead": "max_overhead"}[args.knobs]
    print(f"| iterations | {knob} | measured share median (max) | "
          "held back by overhead (by the backstop) | time |err| (vs 0 ± noise) | time covered | "
          "cpu |err| (vs 0 ± noise) | cpu covered |")
    print("|---|---|---|---|---|---|---|---|")
    for n in lengths:
        base = [r for r in rows if r["length"] == n and r["setting"] == 0]
        for setting in settings:
            cell = [r for r in rows if r["length"] == n and r["setting"] == setting]
            shares = [r["share"] for r in cell]
            cpu = [r for r in cell if r["cpu_cov"] is not None]
            print(f"| {n:,} | {setting:g} | {100 * statistics.median(shares):.3f}% "
                  f"({100 * max(shares):.3f}%) | {sum(r['over_budget'] for r in cell)} "
                  f"({sum(r['backstop'] for r in cell)}) | "
                  f"{paired(cell, base, 'time_err')} | "
                  f"{sum(r['time_cov'] for r in cell)}/{len(cell)} | "
                  f"{paired(cell, base, 'cpu_err')} | "
                  f"{sum(r['cpu_cov'] for r in cpu)}/{len(cpu)} |")
    hw = [r["half_width"] for r in rows if r["setting"] == 0 and r["half_width"] is not None]
    if hw:
        print(f"\nlast stratum's 95% half-width of total time at setting 0 (what target_error "
              f"is compared with): median {100 * statistics.median(hw):.1f}%, min "
              f"{100 * min(hw):.1f}%, max {100 * max(hw):.1f}% over {len(hw)} runs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
