#!/usr/bin/python3
"""Every iteration seqpointd measured, held against the workload's own reading of the same
iteration (issue 19's evidence), on real PyTorch marked with the Python module.

A private seqpointd (its own state dir and socket, runs.only_key, perf task-clock and
context-switches) watches
runs of bench/true_numbers/loop.py, a small LSTM loop that records, for every iteration, its own
wall time and process CPU time (CLOCK_PROCESS_CPUTIME_ID) read beside the begin and end marks.
After each run the measured iterations are read from the daemon's store (state.db, table
measurements) and compared one by one with the loop's reading; the whole-run projections
(`seqpoint show RUN --json`) are compared with the loop's totals.

Configurations: torch.set_num_threads 1, 2, 4, 8, each with OpenMP's default wait policy
(spinning) and OMP_WAIT_POLICY=PASSIVE; a DataLoader with 2 worker processes; a job resumed at
global step 50,000 (iter = 50000 + i); a run that a busy process (one spinning process per CPU,
at the default nice level) starts sharing the CPUs with a third of the way in (a real slowdown);
and the libtorch trainer (examples/seqpoint-train, a small GRU seq2seq on the en-de corpus) at 1,
2, 4 and 8 intra-op threads. Workloads run under `nice -n 10`.

The workload's own reading of an iteration is every thread's own CPU clock, summed, read right
inside the markers (loop.py threads_ns, seqpoint-train cpu_ns); where a thread ended inside the
iteration it falls back to CLOCK_PROCESS_CPUTIME_ID (loop.py cpu_ns). The process clock is not
the first choice: it reads a sibling running on another CPU as of that CPU's last tick.

Columns: measured = iterations with a record in the store (a SeqPoint measured); controls =
observer-effect control iterations, measured with no counter by design (left aside); flagged,
left out = the other measured iterations whose record has no perf:task-clock (the probes left
it out), with "(daemon: N)" when the daemon's own count of flagged windows over the run
(seqpoint_collector_windows_total{where="probe_flagged"}) says otherwise; within 1% / 3% =
share of the rest within 1% / 3% of the loop's CPU time of the same iteration (own readings
disagree = iterations whose two own readings differ by more than 1%, left out of those shares:
a thread born and ended inside, or a tick-old sibling); worst = largest
|difference|; projected = whole-run projection against the loop's summed CPU time / wall time,
"in" when the 95% interval covers it, "(unbounded)" when it has no upper bound; steal = the
daemon's counter windows with hypervisor steal subtracted from task-clock / left out for too
much steal over the run (seqpoint_probe_counting_windows_total).
Below the table: the daemon's process CPU time of each measured iteration (process_cpu_ns,
interpolated between its 10 ms reads of the process's CPU clock) against the workload's own CPU
time of it; context switches per measured iteration, the probes' count less the loop's own
(getrusage, read inside its thread clock reads: loop.py), over every loop.py run.

Each run stops at --iterations (300) or --seconds (35), whichever comes first: with OpenMP
spinning and as many threads as CPUs, a loaded machine makes an iteration ten times slower.

Usage: sudo bench/true_numbers.py [--iterations N] [--seconds S] [--only NAME,...] [--out DIR]
(defaults: every configuration, 300 iterations, 35 s: about 10 minutes on 2 CPUs)
Environment: SEQPOINT_BUILD (default build/). Needs root (eBPF) and a build (seqpointd,
seqpoint, build/sdk/python).
"""

import argparse
import csv
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOP = os.path.join(ROOT, "bench", "true_numbers", "loop.py")

TRAINER = os.path.join("examples", "seqpoint-train")  # under the build directory
CORPUS = os.path.join("examples", "corpora", "ende_fillets.tsv")

# (name, threads, OMP_WAIT_POLICY or None, DataLoader workers, first iteration index, kind)
# kind: "py" (loop.py), "busy" (loop.py, CPUs shared with busy processes from a third of the
# run on), "libtorch" (seqpoint-train)
CONFIGS = [
    ("t1", 1, None, 0, 0, "py"), ("t1-passive", 1, "PASSIVE", 0, 0, "py"),
    ("t2", 2, None, 0, 0, "py"), ("t2-passive", 2, "PASSIVE", 0, 0, "py"),
    ("t4", 4, None, 0, 0, "py"), ("t4-passive", 4, "PASSIVE", 0, 0, "py"),
    ("t8", 8, None, 0, 0, "py"), ("t8-passive", 8, "PASSIVE", 0, 0, "py"),
    ("t2-loader2", 2, None, 2, 0, "py"),
    ("t2-resumed50k", 2, None, 0, 50000, "py"),
    ("t2-busy", 2, "PASSIVE", 0, 0, "busy"),
    ("lt1", 1, None, 0, 0, "libtorch"), ("lt2", 2, None, 0, 0, "libtorch"),
    ("lt4", 4, None, 0, 0, "libtorch"), ("lt8", 8, None, 0, 0, "libtorch"),
]


def die(msg):
    print("true_numbers: " + msg, file=sys.stderr)
    sys.exit(1)


class Daemon:
    def __init__(self, build, out, key_prefix):
        self.cli = os.path.join(build, "agent", "cli", "seqpoint")
        daemon = os.path.join(build, "agent", "daemon", "seqpointd")
        for b in (self.cli, daemon):
            if not os.access(b, os.X_OK):
                die("%s missing: build first (spbuild --target seqpointd seqpoint)" % b)
        self.state = os.path.join(out, "state")
        conf = os.path.join(out, "seqpointd.toml")
        with open(conf, "w") as f:
            f.write('[collectors]\nperf.events = ["task-clock", "context-switches"]\n'
                    '[runs]\nonly_key = "%s"\n'
                    % key_prefix)
        self.env = dict(os.environ, SEQPOINT_CONTROL_SOCKET=os.path.join(out, "run",
                                                                         "control.sock"))
        self.log = open(os.path.join(out, "seqpointd.log"), "w")
        self.daemon_bin = daemon
        with socket.socket() as sock:  # a free port for the metrics endpoint
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.proc = subprocess.Popen(
            [daemon, "--config", conf, "--state-dir", self.state, "--runtime-dir",
             os.path.join(out, "run"), "--metrics-listen", "127.0.0.1:%d" % self.port],
            stderr=self.log, stdout=self.log)
        for _ in range(200):
            if self.cli_json("status") is not None:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        die("seqpointd did not start, see %s" % self.log.name)

    def cli_json(self, *args):
        r = subprocess.run([self.cli, *args, "--json"], env=self.env, capture_output=True,
                           text=True)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    SERIES = {
        "probe_flagged": 'seqpoint_collector_windows_total{where="probe_flagged"}',
        "steal_subtracted": 'seqpoint_probe_counting_windows_total{outcome="steal_subtracted"}',
        "steal_flagged": 'seqpoint_probe_counting_windows_total{outcome="steal_flagged"}',
    }

    def metrics_text(self):
        """The daemon's whole /metrics now ("" when unreadable): kept beside each run's files so
        a flagged window's reason (seqpoint_probe_counting_windows_total by outcome, the probes'
        own stats) can be read afterwards."""
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port,
                                        timeout=5) as r:
                return r.read().decode()
        except (OSError, ValueError):
            return ""

    def counts(self):
        """The daemon's counts since it started ({name: int} of SERIES; None when unreadable):
        windows the probes sent with a counter left out, and with steal subtracted / left out
        for steal."""
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port,
                                        timeout=5) as r:
                out = {}
                for line in r.read().decode().splitlines():
                    for k, series in self.SERIES.items():
                        if line.startswith(series + " "):
                            out[k] = int(float(line.split()[-1]))
                return out
        except (OSError, ValueError):
            return None

    def closed_run(self, key, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            j = self.cli_json("runs", "--all")
            for r in (j or {}).get("runs", []):
                if r.get("key") == key and r.get("state") != "active":
                    return r
            time.sleep(0.5)
        return None

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        subprocess.run([self.daemon_bin, "--state-dir", self.state, "--unpin"],
                       capture_output=True)


def stored_measurements(state_dir, key):
    """{iter: {metric: value}} of the run's measured iterations, from the daemon's store."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(state_dir, "state.db"), uri=True,
                         timeout=10)
    try:
        row = db.execute("SELECT id FROM runs WHERE key = ? ORDER BY id DESC LIMIT 1",
                         (key,)).fetchone()
        if row is None:
            return None
        out = {}
        for it, metric, value in db.execute(
                "SELECT iter, metric, value FROM measurements WHERE run_id = ?", (row[0],)):
            out.setdefault(it, {})[metric] = value
        return out
    finally:
        db.close()


class BusyCpus:
    """One spinning process per CPU at the default nice level, from start() to stop(): the
    workload (nice 10) is slowed down for real, mid-run."""

    def __init__(self):
        self.procs = []

    def start(self):
        for _ in range(os.cpu_count() or 1):
            self.procs.append(subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"]))

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()
        self.procs = []


def reference_ns(r):
    """The workload's own CPU time of an iteration: its threads' clocks, else the process's."""
    return r["threads_ns"] if r.get("threads_ns", -1) >= 0 else r["cpu_ns"]


def total_reference_ns(r):
    """An iteration's CPU time in the whole-run truth: reference_ns, else the trainer's own perf
    task-clock where its clocks gave no reading."""
    ref = reference_ns(r)
    return ref if ref >= 0 else r.get("perf_ns", -1)


def own_readings_disagree(r):
    """Whether the workload's two readings of an iteration differ by more than 1%: its threads'
    clocks miss a thread born and ended inside the iteration, the process clock reads a sibling
    on another CPU as of its last tick. Then no reading can judge the agent to 1%."""
    t, c = r.get("threads_ns", -1), r["cpu_ns"]
    return t > 0 and c > 0 and abs(c - t) > 0.01 * t


def run_loop(d, build, out, key, name, threads, wait_policy, workers, start, iterations,
             seconds, busy):
    env = dict(os.environ, SEQPOINT_RUN_ID=key,
               PYTHONPATH=os.path.join(build, "sdk", "python"))
    env.pop("OMP_WAIT_POLICY", None)
    if wait_policy:
        env["OMP_WAIT_POLICY"] = wait_policy
    trace = os.path.join(out, name + ".csv")
    cmd = ["nice", "-n", "10", "/usr/bin/python3", LOOP, "--threads", str(threads),
           "--iterations", str(iterations), "--workers", str(workers), "--start-iter",
           str(start), "--max-seconds", str(seconds),
           "--seed", str(sum(map(ord, name))), "--csv", trace, "--wait"]
    hog = BusyCpus()
    with open(os.path.join(out, name + ".log"), "w") as log:
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=log, stderr=log,
                             text=True)
        # Start iterating once the daemon has the process (its probes are attached).
        for _ in range(300):
            if d.cli_json("show", key) is not None or p.poll() is not None:
                break
            time.sleep(0.1)
        try:
            p.stdin.write("go\n")
            p.stdin.close()
        except BrokenPipeError:
            pass
        try:
            if busy:
                try:
                    rc = p.wait(timeout=seconds / 3)
                except subprocess.TimeoutExpired:
                    hog.start()
                    rc = p.wait()
            else:
                rc = p.wait()
        finally:
            hog.stop()
    if rc != 0:
        die("workload %s failed (exit %d), see %s" % (name, rc, log.name))
    with open(trace) as f:
        return [{k: int(v) for k, v in r.items()} for r in csv.DictReader(f)]


def run_trainer(build, out, key, name, threads, iterations, seconds):
    """seqpoint-train (libtorch) for `iterations`, stopped after 4 x `seconds` (it writes its
    trace every 200 rows and at its end, so a stopped trainer loses its last rows: it is given
    room to finish); its trace rows."""
    trace = os.path.join(out, name + ".csv")
    env = dict(os.environ, SEQPOINT_RUN_ID=key)
    cmd = ["nice", "-n", "10", os.path.join(build, TRAINER), "--corpus",
           os.path.join(build, CORPUS), "--threads", str(threads), "--iterations",
           str(iterations), "--trace", trace, "--log-every", "1000000",
           # A small model (about 0.2 s an iteration on 2 loaded CPUs), so a run holds enough
           # measured iterations within --seconds.
           "--hidden", "32", "--vocab", "1000", "--batch-size", "8", "--max-len", "24",
           "--seed", str(sum(map(ord, name)))]
    with open(os.path.join(out, name + ".log"), "w") as log:
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
        try:
            rc = p.wait(timeout=4 * seconds)
        except subprocess.TimeoutExpired:
            # Stopped early: the trace keeps every row up to its last flush (200 rows).
            p.terminate()
            p.wait()
            rc = 0
    if rc != 0:
        die("trainer %s failed (exit %d), see %s" % (name, rc, log.name))
    rows = []
    with open(trace) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            if not r.get("iter") or not r.get("time_ns"):
                continue
            cpu = r.get("cpu_ns") or ""
            perf = r.get("task_clock_ns") or ""
            rows.append({"iter": int(r["iter"]), "wall_ns": int(float(r["time_ns"])),
                         "cpu_ns": int(float(cpu)) if cpu else -1,
                         "threads_ns": int(float(cpu)) if cpu else -1,
                         "perf_ns": int(float(perf)) if perf else -1})
    # Every row stays: a row without the thread clocks (the trainer's first iteration, whose
    # threads are born inside it) is left out of the per-iteration comparison only; the whole-run
    # truth counts it at the trainer's own perf task-clock (total_reference_ns), since the daemon
    # projects every iteration.
    return rows


def pct(a, b):
    return 100.0 * (a - b) / b if b else float("nan")


def projection_cell(p, actual):
    if not p:
        return "-"
    if p.get("left_out"):  # the daemon flagged it and left the value out
        return "left out (%s)" % p["left_out"]
    if actual != actual:  # NaN: the workload gave no reading of some iteration
        return "no truth"
    hi = p.get("high")
    unbounded = hi is None or p.get("bounded") is False
    hi = float("inf") if hi is None else hi
    inside = p.get("low", float("nan")) <= actual <= hi
    return "%+.2f%% %s%s" % (pct(p["total"], actual), "in" if inside else "OUT",
                             " (unbounded)" if unbounded else "")


def analyse(name, rows, stored, run, show, probe_flagged, steal):
    own = {r["iter"]: r for r in rows if r["cpu_ns"] >= 0}
    measured = [it for it in stored if it in own]
    # Observer-effect controls are measured with no collector by design (their time is the
    # baseline of the observer-effect check): not flagged, just not counted.
    controls = [it for it in measured if "observer:control" in stored[it]]
    counted = [it for it in measured if "observer:control" not in stored[it]]
    with_tc = [it for it in counted if "perf:task-clock" in stored[it]]
    unsure = [it for it in with_tc if own_readings_disagree(own[it])]
    with_tc = [it for it in with_tc if not own_readings_disagree(own[it])]
    errs = sorted(abs(pct(stored[it]["perf:task-clock"], reference_ns(own[it])))
                  for it in with_tc)
    proj = (show or {}).get("projections", {})
    cpu_known = [total_reference_ns(r) for r in rows]
    # A row with no CPU reading at all leaves the truth incomplete: no cpu comparison then.
    cpu_total = sum(cpu_known) if all(c >= 0 for c in cpu_known) else float("nan")
    wall_total = sum(r["wall_ns"] for r in rows)
    n = len(with_tc)
    # The daemon's process CPU time of each measured iteration (interpolated between its
    # 10 ms reads of the process's CPU clock) against the loop's own CPU time of it.
    cpu_errs = sorted(abs(pct(stored[it]["process_cpu_ns"], own[it]["cpu_ns"]))
                      for it in counted
                      if "process_cpu_ns" in stored[it] and own[it]["cpu_ns"] > 0)
    # Context switches against the loop's own getrusage count of the same iteration (loop.py
    # only): probes - own, per iteration.
    switch_diffs = sorted(int(round(stored[it]["perf:context-switches"])) - own[it]["switches"]
                          for it in counted
                          if "perf:context-switches" in stored[it] and "switches" in own[it])
    return {
        "switch_diffs": switch_diffs,
        "name": name, "iterations": len(rows), "measured": len(measured),
        "controls": len(controls), "counted": len(counted), "with_tc": n,
        "unsure": len(unsure), "flagged": len(counted) - n - len(unsure),
        "probe_flagged": probe_flagged,
        "w1": sum(e <= 1 for e in errs), "w3": sum(e <= 3 for e in errs),
        "worst": errs[-1] if errs else float("nan"),
        "errs": errs,
        "cpu_errs": cpu_errs,
        "unobserved": (run or {}).get("unobserved", "?"),
        "tc": projection_cell(proj.get("perf:task-clock"), cpu_total),
        "time": projection_cell(proj.get("time_ns"), wall_total),
        "per_iter": [(it, reference_ns(own[it]), own[it]["cpu_ns"],
                      stored[it].get("perf:task-clock"), own[it]["wall_ns"])
                     for it in sorted(measured)],
        "steal": steal,
    }


def share(k, n):
    return "%d/%d (%.1f%%)" % (k, n, 100.0 * k / n) if n else "-"


def print_header():
    print("| run | iterations | measured | controls | flagged, left out | own readings disagree "
          "| task-clock within 1% | within 3% | worst | unobserved | task-clock projected "
          "| time projected | steal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def print_row(r):
    print("| %s | %d | %d | %d | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
        r["name"], r["iterations"], r["measured"], r["controls"],
        share(r["flagged"], r["counted"]) + flag_note(r), r["unsure"],
        share(r["w1"], r["with_tc"]), share(r["w3"], r["with_tc"]),
        "%.2f%%" % r["worst"] if r["with_tc"] else "-", r["unobserved"], r["tc"], r["time"],
        "%d / %d" % r["steal"] if r["steal"] else "?"),
        flush=True)


def flag_note(r):
    # The daemon's own count of windows sent with a counter left out, when it differs.
    pf = r.get("probe_flagged")
    return "" if pf is None or pf == r["flagged"] else " (daemon: %d)" % pf


def print_total(results):
    tot = {"measured": 0, "controls": 0, "counted": 0, "with_tc": 0, "flagged": 0, "w1": 0,
           "w3": 0, "iterations": 0, "unsure": 0}
    worst = 0.0
    for r in results:
        for k in tot:
            tot[k] += r[k]
        if r["with_tc"]:
            worst = max(worst, r["worst"])
    print("| all | %d | %d | %d | %s | %d | %s | %s | %.2f%% | | | | |" % (
        tot["iterations"], tot["measured"], tot["controls"], share(tot["flagged"], tot["counted"]),
        tot["unsure"],
        share(tot["w1"], tot["with_tc"]), share(tot["w3"], tot["with_tc"]), worst))
    d = sorted(x for r in results for x in r.get("switch_diffs", []))
    if d:
        print("context switches per iteration, probes - the loop's own getrusage count over %d "
              "iterations: %d equal, %d within 2, min %+d, median %+d, max %+d" % (
                  len(d), sum(x == 0 for x in d), sum(abs(x) <= 2 for x in d), d[0],
                  d[len(d) // 2], d[-1]))
    ce = sorted(e for r in results for e in r.get("cpu_errs", []))
    if ce:
        q = lambda f: ce[min(len(ce) - 1, int(f * (len(ce) - 1) + 0.5))]
        print("process CPU per measured iteration (the daemon's, interpolated between 10 ms "
              "reads) |difference| from the workload's own over %d iterations: median %.3f%%, "
              "90th percentile %.3f%%, max %.3f%%" % (len(ce), q(0.5), q(0.9), ce[-1]))
    errs = sorted(e for r in results for e in r["errs"])
    if errs:
        q = lambda f: errs[min(len(errs) - 1, int(f * (len(errs) - 1) + 0.5))]
        print("task-clock |difference| from the workload's own reading over %d iterations: "
              "median %.3f%%, 90th percentile %.3f%%, 99th %.3f%%, max %.3f%%" % (
                  len(errs), q(0.5), q(0.9), q(0.99), errs[-1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=35,
                    help="a run stops after this long even before --iterations")
    ap.add_argument("--only", default="", help="comma-separated run names (default: all)")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if os.geteuid() != 0:
        die("eBPF probes need root: run with sudo")
    build = os.environ.get("SEQPOINT_BUILD", os.path.join(ROOT, "build"))
    if not os.path.exists(os.path.join(build, "sdk", "python", "seqpoint_probe",
                                       "__init__.py")):
        die("%s/sdk/python missing: build first" % build)
    only = set(filter(None, a.only.split(",")))
    configs = [c for c in CONFIGS if not only or c[0] in only]
    if only - {c[0] for c in CONFIGS}:
        die("unknown run names: %s (known: %s)" % (", ".join(sorted(only - {c[0] for c in CONFIGS})),
                                                   ", ".join(c[0] for c in CONFIGS)))
    if any(c[5] == "libtorch" for c in configs):
        for f in (TRAINER, CORPUS):
            if not os.path.exists(os.path.join(build, f)):
                die("%s/%s missing: build first (spbuild --target seqpoint-train), or leave "
                    "the lt* runs out with --only" % (build, f))
    out = a.out or tempfile.mkdtemp(prefix="seqpoint-true-numbers.")
    os.makedirs(out, exist_ok=True)
    prefix = "tn-%d-" % os.getpid()
    d = Daemon(build, out, prefix)
    results = []
    load_before = open("/proc/loadavg").read().split()[:3]
    print_header()
    try:
        for name, threads, policy, workers, start, kind in configs:
            key = prefix + name
            before = d.counts()
            if kind == "libtorch":
                rows = run_trainer(build, out, key, name, threads, a.iterations, a.seconds)
            else:
                rows = run_loop(d, build, out, key, name, threads, policy, workers, start,
                                a.iterations, a.seconds, kind == "busy")
            run = d.closed_run(key)
            if run is None:
                die("run %s did not close, see %s/seqpointd.log" % (key, out))
            show = d.cli_json("show", key)
            after = d.counts()
            delta = ({k: after.get(k, 0) - before.get(k, 0) for k in Daemon.SERIES}
                     if None not in (before, after) else None)
            pf = delta["probe_flagged"] if delta else None
            steal = (delta["steal_subtracted"], delta["steal_flagged"]) if delta else None
            with open(os.path.join(out, name + ".metrics.txt"), "w") as f:
                f.write(d.metrics_text())
            with open(os.path.join(out, name + ".show.json"), "w") as f:
                json.dump({"run": run, "show": show, "probe_flagged": pf}, f, indent=1)
            stored = stored_measurements(d.state, key)
            if stored is None:
                die("run %s not in the store %s/state.db" % (key, d.state))
            r = analyse(name, rows, stored, run, show, pf, steal)
            with open(os.path.join(out, name + ".measured.csv"), "w") as f:
                f.write("iter,own_cpu_ns,own_process_clock_ns,task_clock_ns,own_wall_ns\n")
                for it, c, pc, tc, w in r["per_iter"]:
                    f.write("%d,%d,%d,%s,%d\n" % (it, c, pc, "" if tc is None else "%.0f" % tc,
                                                  w))
            results.append(r)
            print_row(r)
    finally:
        d.stop()
    print_total(results)
    print("load average (1, 5, 15 min) on %d CPUs: %s before, %s after" % (
        os.cpu_count(), " ".join(load_before), " ".join(open("/proc/loadavg").read().split()[:3])))
    print("files in %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
