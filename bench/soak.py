#!/usr/bin/env python3
"""Soak: seqpointd replays many runs of a generated trace as fast as it can and the figures that
must stay flat are printed per 10^6 iterations (docs/bounds.md): the daemon's resident memory,
the state database (state.db + its WAL), the iteration log and checkpoints it holds, and the
upload spool (upload.url points at a closed port, so the spool fills to its bound and stays).

  bench/soak.py                      # 10^7 iterations: 100 runs of 10^5
  bench/soak.py --rows 20000 --runs 10 --check   # the short version run by ctest

--check exits 1 when a figure grows past its bound (RSS by more than 25% after the first
10^6 iterations plus 8 MiB, the log past its checkpoint bound, the spool past its maximum).
"""
import argparse
import json
import math
import os
import random
import re
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def write_trace(path, rows, seed=7):
    """Log-normal SLs, time linear in SL with 5% noise, a 2x jump in cost half way."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        f.write("iter,seq_len,batch,time_ns,task_clock_ns\n")
        for i in range(rows):
            sl = max(1, min(512, int(round(rng.lognormvariate(math.log(40), 0.6)))))
            t = (2e5 + 2e4 * sl) * max(0.2, rng.gauss(1, 0.05)) * (2 if i >= rows // 2 else 1)
            f.write(f"{i},{sl},32,{int(t)},{int(t * 0.9)}\n")


def control(sock_path, cmd):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    s.sendall((json.dumps({"cmd": cmd}) + "\n").encode())
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    answer = json.loads(data)
    return answer.get("result", answer)


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def active_iterations(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(float(m) for m in re.findall(r"^seqpoint_run_iterations_total\{[^}]*\} (\S+)$",
                                            text, re.M))


def db_figures(state_dir):
    db = os.path.join(state_dir, "state.db")
    size = sum(os.path.getsize(db + s) for s in ("", "-wal") if os.path.exists(db + s))
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        log, ckpt, spool, runs = con.execute(
            "SELECT (SELECT COALESCE(SUM(entries),0) FROM iteration_log),"
            " (SELECT COALESCE(SUM(LENGTH(data)),0) FROM run_checkpoint),"
            " (SELECT COALESCE(SUM(bytes),0) FROM spool), (SELECT COUNT(*) FROM runs)").fetchone()
    finally:
        con.close()
    return size, log, ckpt, spool, runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=100000, help="iterations per run")
    ap.add_argument("--runs", type=int, default=100, help="runs, one after another")
    ap.add_argument("--seqpointd", default=os.path.join(ROOT, "build/agent/daemon/seqpointd"))
    ap.add_argument("--spool-max-bytes", type=int, default=1 << 20)
    ap.add_argument("--check", action="store_true", help="exit 1 when a bound is broken")
    a = ap.parse_args()
    total = a.rows * a.runs
    with tempfile.TemporaryDirectory(prefix="seqpoint-soak-") as tmp:
        trace = os.path.join(tmp, "soak.csv")
        write_trace(trace, a.rows)
        config = os.path.join(tmp, "seqpointd.toml")
        with open(config, "w") as f:
            f.write("[upload]\nurl = \"http://127.0.0.1:9/api/v1/write\"\ninterval_s = 1\n"
                    f"spool_max_bytes = {a.spool_max_bytes}\n")
        port = free_port()
        state = os.path.join(tmp, "state")
        sock = os.path.join(tmp, "run", "control.sock")
        log = open(os.path.join(tmp, "seqpointd.log"), "w")
        d = subprocess.Popen([a.seqpointd, "--config", config, "--state-dir", state,
                              "--runtime-dir", os.path.join(tmp, "run"),
                              "--metrics-listen", f"127.0.0.1:{port}", "--replay",
                              trace + "@soak", "--replay-repeat", str(a.runs)],
                             stderr=log)
        start = time.time()
        rows = []
        step = min(10**6, max(total // 10, 1))
        next_mark = step
        try:
            while True:
                time.sleep(0.2)
                if d.poll() is not None:
                    sys.exit(f"seqpointd exited with {d.returncode}; see its log")
                try:
                    st = control(sock, "status")
                    done = st["runs_closed"] * a.rows + active_iterations(port)
                except (OSError, ValueError):
                    continue
                if done >= next_mark or st["runs_closed"] >= a.runs:
                    size, logn, ckpt, spool, nruns = db_figures(state)
                    rows.append((done, time.time() - start, rss_bytes(d.pid), size, logn, ckpt,
                                 spool, nruns))
                    next_mark = (int(done) // step + 1) * step
                if st["runs_closed"] >= a.runs:
                    break
        finally:
            d.terminate()
            d.wait()
        print(f"soak: {a.runs} runs x {a.rows} iterations = {total:.3g} iterations, "
              f"{rows[-1][1]:.0f} s ({total / rows[-1][1]:.0f} iterations/s)")
        print(f"{'iterations':>12} {'s':>6} {'RSS MiB':>8} {'db MiB':>8} {'log entries':>11} "
              f"{'ckpt KiB':>9} {'spool KiB':>9} {'runs':>5}")
        for done, t, rss, size, logn, ckpt, spool, nruns in rows:
            print(f"{int(done):>12} {t:>6.0f} {rss / 2**20:>8.1f} {size / 2**20:>8.2f} "
                  f"{logn:>11} {ckpt / 1024:>9.1f} {spool / 1024:>9.1f} {nruns:>5}")
        if not a.check:
            return
        bad = []
        base = rows[min(1, len(rows) - 1)][2]
        if max(r[2] for r in rows) > base * 1.25 + 8 * 2**20:
            bad.append("RSS grew")
        if max(r[4] for r in rows) > 65536 + 2 * a.rows:
            bad.append("iteration log past its checkpoint bound")
        if max(r[6] for r in rows) > a.spool_max_bytes:
            bad.append("spool past upload.spool_max_bytes")
        if bad:
            sys.exit("soak: " + ", ".join(bad))
        print("soak: bounds held")


if __name__ == "__main__":
    main()
