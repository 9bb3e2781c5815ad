#!/usr/bin/env python3
"""SeqPoint accuracy on real training traces (the evidence of the selector issue).

Usage: bench/accuracy.py TRACE_DIR [--seqpoint BUILD/agent/cli/seqpoint] [--budget-fraction F]

TRACE_DIR holds, per corpus and model, the traces written by examples/make_traces.sh:
  <corpus>_<model>_t2_run1.csv   2 threads, seed 1
  <corpus>_<model>_t2_run2.csv   the same again (run-to-run noise)
  <corpus>_<model>_t1_run1.csv   1 thread, same seed (the speedup's other configuration)
For each it runs `seqpoint evaluate` (offline and online, at 1/200 of the iterations by
default) and prints a Markdown table: projection error of the total training time, the
baselines at the same number of measured iterations, the run-to-run noise of the total, and
the 1->2 thread speedup projection error. Geomeans over the workloads close the table.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys


def evaluate(seqpoint, trace, extra):
    out = subprocess.run([seqpoint, "evaluate", "--trace", trace, "--metric", "time_ns", "--json"] + extra,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def total_time(path):
    total, col = 0.0, None
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            cells = line.rstrip("\r\n").split(",")
            if col is None:
                col = cells.index("time_ns")
                continue
            total += float(cells[col])
    return total


def geomean(values):
    values = [max(abs(v), 1e-6) for v in values]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace_dir")
    ap.add_argument("--seqpoint", default=os.path.join(os.path.dirname(__file__), "..", "build", "agent", "cli", "seqpoint"))
    ap.add_argument("--budget-fraction", default="0.005")
    a = ap.parse_args()
    runs = sorted(glob.glob(os.path.join(a.trace_dir, "*_t2_run1.csv")))
    if not runs:
        sys.exit(f"no *_t2_run1.csv traces in {a.trace_dir}: run examples/make_traces.sh first")
    budget = ["--budget-fraction", a.budget_fraction]
    rows, off_err, on_err, sp_err, noise, first_err, stride_err, rand_err = [], [], [], [], [], [], [], []
    t1_errs, t1_on_errs = [], []
    for run1 in runs:
        name = os.path.basename(run1)[: -len("_t2_run1.csv")]
        run2 = run1.replace("_run1.csv", "_run2.csv")
        t1 = run1.replace("_t2_", "_t1_")
        t1_off = t1_on = None
        if os.path.exists(t1):
            t1_off = evaluate(a.seqpoint, t1, budget)["metrics"]["time_ns"]["error_pct"]
            t1_on = evaluate(a.seqpoint, t1, budget + ["--online"])["metrics"]["time_ns"]["error_pct"]
            t1_errs.append(t1_off)
            t1_on_errs.append(t1_on)
        off = evaluate(a.seqpoint, run1, budget)
        on = evaluate(a.seqpoint, run1, budget + ["--online"])
        m_off, m_on = off["metrics"]["time_ns"], on["metrics"]["time_ns"]
        sp = None
        if os.path.exists(t1):
            # speedup of 2 threads over 1: T(1 thread) / T(2 threads), over one selection
            s = evaluate(a.seqpoint, t1, budget + ["--compare", run1])["metrics"]["time_ns"]["speedup"]
            sp = s
            sp_err.append(s["error_pct"])
        nz = None
        if os.path.exists(run2):
            r1, r2 = total_time(run1), total_time(run2)
            nz = (r2 - r1) / r1 * 100
            noise.append(nz)
        off_err.append(m_off["error_pct"])
        on_err.append(m_on["error_pct"])
        b = m_off["baselines_error_pct"]
        first_err.append(b["first_n"])
        stride_err.append(b["uniform_stride"])
        rand_err.append(b["random_median_abs"])
        rows.append((name, off["iterations"], off["measured"], m_off, m_on, b, sp, nz, t1_off, t1_on))
    print(f"SeqPoint accuracy on real libtorch training (budget {a.budget_fraction} of iterations)\n")
    print("| workload | iterations | measured | offline error % (95% interval covers) | online error % | "
          "first-N % | uniform stride % | random median abs % | run-to-run noise % | speedup actual | speedup error % | "
          "1-thread offline % | 1-thread online % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, n, meas, mo, mn, b, sp, nz, t1o, t1n in rows:
        cov = "yes" if mo["covered"] else "no"
        sp_a = f"{sp['actual']:.3f}" if sp else "-"
        sp_e = f"{sp['error_pct']:+.3f}" if sp else "-"
        nz_s = f"{nz:+.2f}" if nz is not None else "-"
        print(f"| {name} | {n} | {meas} (1/{n / max(meas, 1):.0f}) | {mo['error_pct']:+.3f} ({cov}) | "
              f"{mn['error_pct']:+.3f} | {b['first_n']:+.2f} | {b['uniform_stride']:+.2f} | "
              f"{b['random_median_abs']:.2f} | {nz_s} | {sp_a} | {sp_e} | "
              f"{'-' if t1o is None else f'{t1o:+.3f}'} | {'-' if t1n is None else f'{t1n:+.3f}'} |")
    print(f"| **geomean of abs** | | | {geomean(off_err):.3f} | {geomean(on_err):.3f} | {geomean(first_err):.2f} | "
          f"{geomean(stride_err):.2f} | {geomean(rand_err):.2f} | {geomean(noise) if noise else float('nan'):.2f} | | "
          f"{geomean(sp_err) if sp_err else float('nan'):.3f} | "
          f"{geomean(t1_errs) if t1_errs else float('nan'):.3f} | {geomean(t1_on_errs) if t1_on_errs else float('nan'):.3f} |")
    print(f"\nonline / offline error ratio (geomean): {geomean(on_err) / geomean(off_err):.2f} (2 threads), "
          f"{geomean(t1_on_errs) / geomean(t1_errs) if t1_errs else float('nan'):.2f} (1 thread)")


if __name__ == "__main__":
    main()
