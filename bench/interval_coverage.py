#!/usr/bin/env python3
"""Do the online projections' 95% intervals cover the truth? One command, >= 30 runs.

Usage: bench/interval_coverage.py [--seqpoint build/agent/cli/seqpoint] [--runs-per-trace 10]
                                  [--million] [--json OUT] [--first-occurrences]
       bench/interval_coverage.py --live DIR [DIR ...] [--replay build/bench/interval_coverage_replay]
       bench/interval_coverage.py --million-replay [--seqpointd build/agent/daemon/seqpointd]

Runs `seqpoint evaluate --online --json` (the selector and the whole-run estimator seqpointd
runs: selector/estimate/whole_run_estimator.h) on:
  - resampled recorded PyTorch runs: tests/data/online/*.csv and tests/data/agent/*.csv (real
    python3-torch and libtorch traces, every iteration measured). Each variant is a seeded
    moving-block resample: the run is cut into blocks of 64 iterations, and block j is drawn
    from the blocks within +-4 positions of j (the first 2 blocks, the warm-up, kept as they
    are), so the run's shape (warm-up, slowdown) stays and the noise is redrawn. These are not
    new runs of the trainer: blocks repeat, which makes them a little easier than fresh runs.
  - generated runs with a warm-up, a slowdown that leaves the work (cpu_ns) unchanged, and 5%
    noise (seeded), 3000 iterations each;
  - with --million, one generated run of 10^6 iterations (the replayed long run).
With --live: the short real runs of bench/true_numbers.py (each DIR an --out of it, with its
daemon's state.db) projected as the live seqpointd saw them: every iteration's own time, the
iterations the daemon measured (controls and windows the probes flagged: time only), through
build/bench/interval_coverage_replay; the same traces with the selector's own choice; and windows
of 100-500 iterations cut from the recorded traces (real runs, not resampled). Coverage counts
per metric, with the projections left out as unreliable (docs/estimators.md) counted apart.
With --million-replay: a generated 10^6-iteration run replayed through seqpointd --replay
(agent/source/trace_replay_source.h, the daemon's own path): wall time, peak RSS, projections.
For each run and metric: whether the 95% interval holds the actual total, and the whole-run
error. Time is projected from the measured iterations alone against the cost proxy: its
self-check is reported twice, on the run's time strata (cut on those very times) and on
doubling windows only (the honest one, which seqpointd exports). Counts, not only rates.
"""
import argparse
import csv
import glob
import json
import math
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = 64
REACH = 4


def read_trace(path):
    with open(path) as f:
        lines = [l for l in f if not l.startswith("#")]
    rows = list(csv.DictReader(lines))
    return list(rows[0].keys()), rows


def write_trace(path, cols, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for i, r in enumerate(rows):
            out = [r[c] for c in cols]
            out[cols.index("iter")] = str(i)
            w.writerow(out)


def resample(rows, seed):
    rng = random.Random(seed)
    blocks = [rows[i:i + BLOCK] for i in range(0, len(rows), BLOCK)]
    out = []
    for j, b in enumerate(blocks):
        if j < 2:
            out.extend(b)
            continue
        lo, hi = max(2, j - REACH), min(len(blocks) - 1, j + REACH)
        src = blocks[rng.randint(lo, hi)]
        out.extend(src[:len(b)] if len(src) >= len(b) else src)
    return out


def generated(n, seed):
    rng = random.Random(seed)
    slow_at = int(n * rng.uniform(0.4, 0.7))
    slow = rng.uniform(1.2, 1.8)
    rows = []
    for i in range(n):
        sl = int(min(150, max(1, round(math.exp(rng.gauss(math.log(20), 0.6))))))
        work = (2e5 + 1e3 * sl * 32) * max(0.2, 1 + rng.gauss(0, 0.05))
        warm = 1 + 1.0 * max(0.0, 1 - i / 150)
        t = work * warm * (slow if i >= slow_at else 1)
        rows.append({"iter": i, "seq_len": sl, "batch": 32, "tokens": sl * 30,
                     "time_ns": round(t), "cpu_ns": round(work * warm)})
    return ["iter", "seq_len", "batch", "tokens", "time_ns", "cpu_ns"], rows


def evaluate(seqpoint, path, extra=()):
    out = subprocess.run([seqpoint, "evaluate", "--trace", path, "--online", "--json", *extra],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def compare_first_occurrences(seqpoint, runs):
    """The same runs projected without and with first occurrences as their own post-stratum
    (`evaluate --first-occurrences`): coverage and error per metric, side by side."""
    table = {}  # metric -> {variant: [covered, n, abs errors]}
    print("| run | metric | error % (off) | error % (on) | covered (off / on) |")
    print("|---|---|---|---|---|")
    for name, path in runs:
        res = {v: evaluate(seqpoint, path, ["--first-occurrences"] if v == "on" else [])
               for v in ("off", "on")}
        for metric, m in res["off"]["metrics"].items():
            on = res["on"]["metrics"].get(metric)
            if on is None:
                continue
            for v, r in (("off", m), ("on", on)):
                t = table.setdefault(metric, {}).setdefault(v, [0, 0, []])
                t[0] += bool(r["covered"])
                t[1] += 1
                t[2].append(abs(r["error_pct"]))
            print(f"| {name} | {metric} | {m['error_pct']:+.2f} | {on['error_pct']:+.2f} | "
                  f"{'yes' if m['covered'] else 'NO'} / {'yes' if on['covered'] else 'NO'} |")
    print()
    print("| metric | runs | covers (off) | covers (on) | median abs err % (off / on) | "
          "max abs err % (off / on) |")
    print("|---|---|---|---|---|---|")
    for metric, v in sorted(table.items()):
        off, on = v["off"], v["on"]
        med = lambda e: sorted(e)[len(e) // 2]
        print(f"| {metric} | {off[1]} | {off[0]}/{off[1]} | {on[0]}/{on[1]} | "
              f"{med(off[2]):.2f} / {med(on[2]):.2f} | {max(off[2]):.2f} / {max(on[2]):.2f} |")


def harness_runs(dirs, out):
    """(name, trace, measured file) of every run of bench/true_numbers.py outputs in `dirs`: the
    workload's own per-iteration reading as a trace (iter renumbered, seq_len, time_ns, cpu_ns)
    and the iterations its daemon measured, read from the daemon's store."""
    import sqlite3
    runs = []
    for d in dirs:
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d, "state", "state.db"), uri=True)
        for show in sorted(glob.glob(os.path.join(d, "*.show.json"))):
            name = os.path.basename(show)[:-len(".show.json")]
            src = os.path.join(d, name + ".csv")
            key = ((json.load(open(show)).get("run")) or {}).get("key")
            row = key and db.execute("SELECT id FROM runs WHERE key = ? ORDER BY id DESC LIMIT 1",
                                     (key,)).fetchone()
            if not row or not os.path.exists(src):
                continue
            with open(src) as f:
                recs = list(csv.DictReader(l for l in f if not l.startswith("#")))
            rows = []
            for r in recs:
                if not r.get("iter"):
                    continue
                if "wall_ns" in r:  # loop.py: its threads' clocks, else the process clock
                    t = int(r["wall_ns"])
                    c = int(r.get("threads_ns") or -1)
                    c = c if c >= 0 else int(r["cpu_ns"])
                else:  # seqpoint-train
                    t = int(float(r["time_ns"])) if r.get("time_ns") else -1
                    c = int(float(r["cpu_ns"])) if r.get("cpu_ns") else -1
                if t > 0 and c >= 0:
                    rows.append((int(r["iter"]), int(float(r["seq_len"])), t, c))
            if len(rows) < 20:
                continue
            index = {it: i for i, (it, _, _, _) in enumerate(rows)}
            base = os.path.join(out, "%s_%s" % (os.path.basename(os.path.normpath(d)), name))
            with open(base + ".csv", "w") as f:
                f.write("iter,seq_len,time_ns,cpu_ns\n")
                for i, (_, sl, t, c) in enumerate(rows):
                    f.write("%d,%d,%d,%d\n" % (i, sl, t, c))
            kinds = {}
            for it, metric in db.execute("SELECT iter, metric FROM measurements WHERE run_id = ?",
                                         row):
                kinds.setdefault(it, set()).add(metric)
            with open(base + ".measured", "w") as f:
                for it in sorted(kinds):
                    if it in index:
                        m = kinds[it]
                        kind = ("control" if "observer:control" in m else
                                "measured" if "perf:task-clock" in m else "flagged")
                        f.write("%d,%s\n" % (index[it], kind))
            runs.append((os.path.basename(base), base + ".csv", base + ".measured"))
        db.close()
    return runs


def windows(out):
    """Runs of 100-500 iterations cut from the recorded traces at every 100th iteration."""
    runs = []
    for t in sorted(glob.glob(os.path.join(ROOT, "tests/data/online/*.csv")) +
                    glob.glob(os.path.join(ROOT, "tests/data/agent/*.csv"))):
        cols, rows = read_trace(t)
        for n in (100, 150, 200, 300, 500):
            for off in range(0, len(rows) - n + 1, 100):
                p = os.path.join(out, "%s_%d_%d.csv" % (os.path.basename(t)[:-4], off, n))
                write_trace(p, cols, rows[off:off + n])
                runs.append((os.path.basename(p), p, None))
    return runs


def live_coverage(args):
    if not os.access(args.replay, os.X_OK):
        sys.exit(f"interval_coverage: {args.replay} is not an executable; build it first "
                 "(spbuild --target interval_coverage_replay)")
    tmp = tempfile.mkdtemp(prefix="interval_coverage.")
    harness = harness_runs(args.live, tmp)
    sets = [("live, as the daemon measured", harness),
            ("live traces, the selector's own choice", [(n, t, None) for n, t, _ in harness]),
            ("recorded, windows of 100-500", windows(tmp))]
    print("| runs | metric | projections | 95% interval covers | left out (unreliable) | "
          "covers, of those kept | median half-width |")
    print("|---|---|---|---|---|---|---|")
    misses = []
    for label, runs in sets:
        table = {}
        for name, trace, measured in runs:
            cmd = [args.replay, trace] + (["--measured", measured] if measured else [])
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            for metric, m in r["metrics"].items():
                t = table.setdefault(metric, {"n": 0, "cov": 0, "out": 0, "kept_cov": 0, "w": []})
                t["n"] += 1
                t["cov"] += m["covered"]
                t["out"] += not m["reliable"]
                t["kept_cov"] += m["reliable"] and m["covered"]
                if m["high"] is not None and m["actual"]:
                    t["w"].append(100 * (m["high"] - m["low"]) / 2 / m["actual"])
                if not m["covered"]:
                    misses.append((label, name, metric, r["measured"], m["error_pct"],
                                   "left out" if not m["reliable"] else "printed"))
        for metric, t in sorted(table.items()):
            w = sorted(t["w"])
            kept = t["n"] - t["out"]
            print(f"| {label} | {metric} | {t['n']} | {t['cov']}/{t['n']} | {t['out']} | "
                  f"{t['kept_cov']}/{kept} | {w[len(w) // 2] if w else float('nan'):.1f}% |")
    print()
    print("| runs | run | metric | measured | error % | |")
    print("|---|---|---|---|---|---|")
    for m in misses:
        print("| %s | %s | %s | %d | %+.1f | %s |" % m)


def million_replay(args):
    """A generated 10^6-iteration run through seqpointd --replay: time, peak RSS, projections."""
    import time
    if not os.access(args.seqpointd, os.X_OK):
        sys.exit(f"interval_coverage: {args.seqpointd} is not an executable; build it first")
    tmp = tempfile.mkdtemp(prefix="interval_coverage.")
    cols, rows = generated(10 ** 6, 77)
    trace = os.path.join(tmp, "generated_1e6.csv")
    write_trace(trace, cols, rows)
    actual = {c: sum(float(r[c]) for r in rows) for c in ("time_ns", "cpu_ns")}
    for d in ("state", "run"):
        os.makedirs(os.path.join(tmp, d))
    conf = os.path.join(tmp, "seqpointd.toml")
    with open(conf, "w") as f:
        f.write("[collectors]\nperf.events = [\"task-clock\"]\n")
    log = open(os.path.join(tmp, "seqpointd.log"), "w+")
    t0 = time.monotonic()
    p = subprocess.Popen([args.seqpointd, "--config", conf, "--state-dir",
                          os.path.join(tmp, "state"), "--runtime-dir", os.path.join(tmp, "run"),
                          "--metrics-listen", "", "--replay", trace + "@million"],
                         stdout=log, stderr=log)
    while "replay finished" not in open(log.name).read():
        if p.poll() is not None:
            sys.exit("interval_coverage: seqpointd exited, see " + log.name)
        time.sleep(0.2)
    wall = time.monotonic() - t0
    cli = os.path.join(os.path.dirname(os.path.dirname(args.seqpointd)), "cli", "seqpoint")
    show = json.loads(subprocess.run(
        [cli, "show", "million", "--json"], check=True, capture_output=True, text=True,
        env=dict(os.environ, SEQPOINT_CONTROL_SOCKET=os.path.join(tmp, "run", "control.sock")))
        .stdout)
    # seqpointd's own peak (not getrusage's children: a fork of this process, holding the
    # generated rows, would count before its exec).
    rss = 0
    with open("/proc/%d/status" % p.pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                rss = int(line.split()[1])  # KiB
    p.terminate()
    p.wait()
    print(f"10^6 iterations replayed through seqpointd in {wall:.1f} s (from its start; trace "
          f"written beforehand), seqpointd peak RSS {rss / 1024:.0f} MiB; iterations "
          f"{show['run']['iterations']}")
    print("| metric | measured | projected | 95% interval | actual | error % | covers |")
    print("|---|---|---|---|---|---|---|")
    for metric, pr in sorted(show["projections"].items()):
        a = actual.get(metric, pr.get("actual"))
        if pr.get("left_out"):
            print(f"| {metric} | {pr['measured']} | left out: {pr['left_out']} | | {a:.4g} | | |")
            continue
        hi = pr["high"] if pr["high"] is not None else float("inf")
        print(f"| {metric} | {pr['measured']} | {pr['total']:.4g} | [{pr['low']:.4g}, {hi:.4g}] "
              f"| {a:.4g} | {100 * (pr['total'] - a) / a:+.2f} | "
              f"{'yes' if pr['low'] <= a <= hi else 'NO'} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seqpoint", default=os.path.join(ROOT, "build/agent/cli/seqpoint"))
    ap.add_argument("--runs-per-trace", type=int, default=10)
    ap.add_argument("--generated", type=int, default=6)
    ap.add_argument("--million", action="store_true", help="also the 10^6-iteration run")
    ap.add_argument("--json", help="also write every row here")
    ap.add_argument("--first-occurrences", action="store_true",
                    help="compare the projections without and with each SL's first iteration "
                         "as its own post-stratum (docs/estimators.md)")
    ap.add_argument("--live", nargs="+", metavar="DIR",
                    help="bench/true_numbers.py output directories: their runs as the daemon "
                         "measured them, and windows of the recorded traces")
    ap.add_argument("--replay", default=os.path.join(ROOT, "build/bench/interval_coverage_replay"))
    ap.add_argument("--million-replay", action="store_true",
                    help="a 10^6-iteration run through seqpointd --replay: time, peak RSS")
    ap.add_argument("--seqpointd", default=os.path.join(ROOT, "build/agent/daemon/seqpointd"))
    args = ap.parse_args()
    if args.live:
        live_coverage(args)
        return
    if args.million_replay:
        million_replay(args)
        return
    if not os.access(args.seqpoint, os.X_OK):
        sys.exit(f"interval_coverage: {args.seqpoint} is not an executable; build it first")
    recorded = sorted(glob.glob(os.path.join(ROOT, "tests/data/online/*.csv")) +
                      glob.glob(os.path.join(ROOT, "tests/data/agent/*.csv")))
    runs = []  # (name, path)
    tmp = tempfile.mkdtemp(prefix="interval_coverage.")
    for t in recorded:
        cols, rows = read_trace(t)
        for s in range(args.runs_per_trace):
            p = os.path.join(tmp, f"{os.path.basename(t)[:-4]}_r{s}.csv")
            write_trace(p, cols, resample(rows, s))
            runs.append((os.path.basename(p), p))
    for s in range(args.generated):
        cols, rows = generated(3000, 1000 + s)
        p = os.path.join(tmp, f"generated_{s}.csv")
        write_trace(p, cols, rows)
        runs.append((os.path.basename(p), p))
    if args.million:
        cols, rows = generated(10 ** 6, 77)
        p = os.path.join(tmp, "generated_1e6.csv")
        write_trace(p, cols, rows)
        runs.append(("generated_1e6.csv", p))
    if args.first_occurrences:
        compare_first_occurrences(args.seqpoint, runs)
        return
    table = {}  # metric -> [covered, runs, errors]
    checks = {"strata": [0, 0, []], "windows": [0, 0, []]}
    rows_out = []
    print("| run | iterations | measured | metric | error % | covered | self-check err % (strata / windows) |")
    print("|---|---|---|---|---|---|---|")
    for name, path in runs:
        r = evaluate(args.seqpoint, path)
        for metric, m in r["metrics"].items():
            if metric in ("page_faults", "context_switches"):
                pass
            bounded = m.get("bounded", True)
            cov = bool(m["covered"])
            e = m["error_pct"]
            t = table.setdefault(metric, [0, 0, [], 0])
            t[0] += cov
            t[1] += 1
            t[2].append(abs(e))
            t[3] += not bounded
            sc = m.get("self_check")
            sc_txt = ""
            if sc:
                checks["strata"][0] += sc["covered"]
                checks["strata"][1] += 1
                checks["strata"][2].append(abs(sc["error_pct"]))
                checks["windows"][0] += sc["independent_covered"]
                checks["windows"][1] += 1
                checks["windows"][2].append(abs(sc["independent_error_pct"]))
                sc_txt = f"{sc['error_pct']:+.2f} / {sc['independent_error_pct']:+.2f}"
            print(f"| {name} | {r['iterations']} | {r['measured']} | {metric} | {e:+.2f} | "
                  f"{'yes' if cov else 'NO'}{'' if bounded else ' (unbounded)'} | {sc_txt} |")
            rows_out.append({"run": name, "iterations": r["iterations"], "measured": r["measured"],
                             "metric": metric, "error_pct": e, "covered": cov, "bounded": bounded,
                             "self_check": sc})
    print()
    print("| metric | runs | 95% interval covers | unbounded | median abs error % | max abs error % |")
    print("|---|---|---|---|---|---|")
    for metric, (cov, n, errs, unb) in sorted(table.items()):
        errs.sort()
        print(f"| {metric} | {n} | {cov}/{n} | {unb} | {errs[len(errs) // 2]:.2f} | {errs[-1]:.2f} |")
    for k, (cov, n, errs) in checks.items():
        if n:
            errs.sort()
            print(f"| time self-check ({k}) | {n} | {cov}/{n} | - | {errs[len(errs) // 2]:.2f} | "
                  f"{errs[-1]:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows_out, f, indent=1)


if __name__ == "__main__":
    main()
