#!/usr/bin/env python3
"""What measuring costs: seqpointd watching a USDT-marked C loop (bench/cost/cost_loop.c).

    sudo bench/cost/cost_bench.py [--quick] [--seqpointd PATH] [--config TOML] [--json OUT]

For 1, 8 and 64 processes at 10, 100, 1,000 and 10,000 iterations a second each, each cell runs the same loops twice in the same bench run: with no agent (the
baseline, with no seqpointd running), then watched by a seqpointd started for the cell
(runs.only_key = "cost-": other processes on the machine are not its runs). Per cell:
  - the trainer's added time per unmeasured and per measured iteration: the mean of each
    iteration's own time (begin marker to end marker, cost_loop.c) with the agent, split by
    whether seqpointd measured it (`seqpoint show` SeqPoints), less the baseline's mean;
    the baseline's p50-p90 spread beside it as the noise floor;
  - seqpointd's CPU (utime + stime over the cell) per 1,000 iterations, and its RSS after it;
  - the measured share of the cell's iterations;
  - seqpointd's loop latency (`seqpoint status --json`, source.loop_latency.woken): for every
    record that wakes the daemon at once (the begin and end of a hooked iteration: hooks are
    armed hook_lead iterations ahead of each slot, so more are hooked than measured), the time
    from the probe's CLOCK_MONOTONIC stamp in the kernel to the loop starting to handle it,
    p50/p99/max (bucketed, <= 6.25% high) and how many; end records of unhooked iterations are
    batched on purpose (read every 256 KiB of backlog or probes.poll_interval_ms) and their age
    is the batch delay (source.loop_latency.batched), never counted as latency.
A cell whose total rate is above --max-total-rate (64 x 10^4 = 640,000 iterations/s: more than
2 cores can drive with 20 us of work each) is not skipped but saturated: its processes ask for
their rate, each runs --max-total-rate x --seconds / processes iterations, and the rate the
machine actually drove, with and without the agent, is printed (`achieved`). Others above the
limit are skipped and said so.
Then a real PyTorch training loop (torch_loop.py: a small LSTM on the CPU, one thread, every
iteration marked with seqpoint_probe), --torch-pairs times without the agent and with it,
alternating: throughput with the agent over the baseline of the same pair, the median ratio,
and the baseline runs' own spread (max/min - 1) as the noise floor.
Then the measured share of iterations for runs of 10^3 .. 10^6 iterations (10^5 with --quick),
from `seqpoint select --online` replaying trace_gen traces (the daemon's selector, no probes).
Every process is its own run (its own SEQPOINT_RUN_ID). Needs root (eBPF).
"""
import argparse, json, os, shutil, signal, statistics, struct, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HZ = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ  # utime, stime


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def read_times(path):
    with open(path, "rb") as f:
        data = f.read()
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def attached(args, sock):
    out = cli(args.seqpoint, sock, "status", "--json")
    return int((json.loads(out).get("source") or {}).get("processes", 0)) if out else 0


def run_loops(loop, procs, iters, rate, work_us, out, tag, env_extra=None, ready=None,
              on_start=None):
    """Runs the loops, all started together once ready() (every loop attached) or 30 s passed;
    returns each process's iteration times and the wall time of them all."""
    ps = []
    gate = f"{out}/{tag}.gate"
    if os.path.exists(gate):
        os.unlink(gate)
    os.mkfifo(gate)
    for i in range(procs):
        env = dict(os.environ, COST_LOOP_GATE=gate)
        if env_extra:
            env["SEQPOINT_RUN_ID"] = f"{tag}-{i}"
        ps.append(subprocess.Popen([loop, str(iters), str(rate), str(work_us), f"{out}/{tag}-{i}.bin"],
                                   env=env, stdout=subprocess.DEVNULL))
    end = time.time() + 30
    while ready and not ready() and time.time() < end:
        time.sleep(0.2)
    if on_start:
        on_start()
    t0 = time.time()
    os.close(os.open(gate, os.O_WRONLY))  # every loop blocked in open() starts now
    for p in ps:
        if p.wait() != 0:
            sys.exit(f"cost_bench: cost_loop failed ({p.returncode})")
    wall = time.time() - t0
    return [read_times(f"{out}/{tag}-{i}.bin") for i in range(procs)], wall


def cli(seqpoint, sock, *args):
    env = dict(os.environ, SEQPOINT_CONTROL_SOCKET=sock)
    r = subprocess.run([seqpoint, *args], env=env, capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def measured_iters(seqpoint, sock, key, deadline_s=10, end=None):
    """The run's measured iterations (its SeqPoints' iters), once the run is finished (or at
    `end`, a deadline shared by the cell's runs)."""
    end = end or time.time() + deadline_s
    while time.time() < end:
        out = cli(seqpoint, sock, "show", key, "--json")
        if out:
            s = json.loads(out)
            if s.get("run", {}).get("state") == "finished" or time.time() > end - 1:
                its = set()
                for p in s.get("seqpoints", []):
                    its.update(p.get("iters", []))
                return its, s
        time.sleep(0.2)
    return set(), {}


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def start_daemon(args, out, tag):
    """One seqpointd for one cell's agent phase, watching only the bench's own runs."""
    shutil.rmtree(f"{out}/state", ignore_errors=True)
    shutil.rmtree(f"{out}/run", ignore_errors=True)
    conf = f"{out}/seqpointd.toml"
    with open(conf, "w") as f:
        f.write('[runs]\nonly_key = "cost-"\n' + "".join(line + "\n" for line in args.conf))
    log = open(f"{out}/seqpointd-{tag}.log", "w")
    d = subprocess.Popen([args.seqpointd, "--config", conf, "--state-dir", f"{out}/state",
                          "--runtime-dir", f"{out}/run", "--metrics-listen", "127.0.0.1:0"],
                         stderr=log, stdout=log)
    sock = f"{out}/run/control.sock"
    for _ in range(150):
        if cli(args.seqpoint, sock, "status") is not None:
            time.sleep(0.5)  # its start-up (BPF load) is not the watch's cost
            return d, sock
        time.sleep(0.1)
    d.kill()
    sys.exit(f"cost_bench: seqpointd did not start (see {out}/seqpointd-{tag}.log)")


def pctl(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def loop_latency(args, sock):
    """The daemon's own loop latency figures (Daemon status, source.loop_latency)."""
    out = cli(args.seqpoint, sock, "status", "--json")
    if not out:
        return {}
    src = json.loads(out).get("source") or {}
    return src.get("loop_latency", {}).get("woken", {})


def cell(args, loop, procs, rate, out, saturate=False):
    iters = max(10, int(rate * args.seconds))
    if saturate:
        iters = max(10, int(args.max_total_rate * args.seconds / procs))
    tag = f"cost-c{procs}x{rate}"
    # The baseline first, with no seqpointd running at all (nothing attached).
    base, base_wall = run_loops(loop, procs, iters, rate, args.work_us, out, tag + "-off")
    base_all = [t for ts in base for t in ts]
    daemon, sock = start_daemon(args, out, tag)
    try:
        c0 = []  # read once every loop is attached: the steady state, not the attaching
        on, wall = run_loops(loop, procs, iters, rate, args.work_us, out, tag, env_extra=True,
                             ready=lambda: attached(args, sock) >= procs,
                             on_start=lambda: c0.append(cpu_s(daemon.pid)))
        cpu = cpu_s(daemon.pid) - c0[0]
        rss = rss_kib(daemon.pid)
        measured, unmeasured = [], []
        n_measured = 0
        end = time.time() + 15
        for i, ts in enumerate(on):
            its, _ = measured_iters(args.seqpoint, sock, f"{tag}-{i}", end=max(end, time.time() + 1.2))
            n_measured += len(its)
            for k, t in enumerate(ts):
                (measured if k in its else unmeasured).append(t)
        lat = loop_latency(args, sock)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
    b, b50 = mean(base_all), pctl(base_all, 0.5)
    total = procs * iters
    return {
        "procs": procs, "rate": rate, "iterations": total, "wall_s": round(wall, 3),
        "baseline_mean_ns": round(b), "baseline_p50_ns": round(b50),
        "noise_p50_p90_ns": round(pctl(base_all, 0.9) - b50),
        "added_unmeasured_mean_ns": round(mean(unmeasured) - b),
        "added_unmeasured_p50_ns": round(pctl(unmeasured, 0.5) - b50),
        "added_measured_mean_ns": round(mean(measured) - b) if measured else None,
        "added_measured_p50_ns": round(pctl(measured, 0.5) - b50) if measured else None,
        "measured": n_measured, "measured_share": round(n_measured / total, 5),
        "daemon_cpu_ms_per_1000": round(1000 * cpu / total * 1000, 3),
        "daemon_cpu_pct_core": round(100 * cpu / wall, 2),
        "daemon_rss_kib": rss,
        "saturated": saturate,
        "achieved_base_it_s": round(total / base_wall), "achieved_agent_it_s": round(total / wall),
        "loop_latency_n": lat.get("count", 0), "loop_latency_p50_us": lat.get("p50_us"),
        "loop_latency_p99_us": lat.get("p99_us"), "loop_latency_max_us": lat.get("max_us"),
    }


def torch_run(args, out, tag, watched):
    env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "sdk", "python"))
    if watched:
        env["SEQPOINT_RUN_ID"] = tag
    r = subprocess.run(["nice", "-n", "0", "/usr/bin/python3", os.path.join(ROOT, "bench", "cost", "torch_loop.py"),
                        "--iterations", str(args.torch_iterations)],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"cost_bench: torch_loop.py failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def torch_pairs(args, out):
    """Real PyTorch throughput with and without the agent, alternating, --torch-pairs times."""
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
        print("PyTorch: skipped: /usr/bin/python3 cannot import torch (install python3-torch)")
        return None
    rows = []
    for k in range(args.torch_pairs):
        tag = f"cost-torch-{k}"
        row = {}
        # Alternate which goes first, so a drift of the machine does not favour one side.
        for watched in ((False, True) if k % 2 == 0 else (True, False)):
            if not watched:
                row["base"] = torch_run(args, out, tag, False)["it_per_s"]
                continue
            daemon, sock = start_daemon(args, out, tag)
            try:
                c0 = cpu_s(daemon.pid)
                r = torch_run(args, out, tag, True)
                cpu = cpu_s(daemon.pid) - c0
                its, show = measured_iters(args.seqpoint, sock, tag)
                lat = loop_latency(args, sock)
            finally:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait()
            row.update(agent=r["it_per_s"], measured=len(its), cpu_s=cpu, lat=lat,
                       seen=show.get("run", {}).get("iterations"))
        row["ratio"] = row["agent"] / row["base"]
        rows.append(row)
        print(f"  pair {k}: baseline {row['base']:.1f} it/s, with seqpointd {row['agent']:.1f} it/s "
              f"(ratio {row['ratio']:.4f}); measured {row['measured']} of {row['seen']} seen; "
              f"daemon CPU {1000 * row['cpu_s']:.0f} ms; loop latency p50/p99/max "
              f"{row['lat'].get('p50_us')}/{row['lat'].get('p99_us')}/{row['lat'].get('max_us')} us "
              f"(n={row['lat'].get('count', 0)})", flush=True)
    base = [r["base"] for r in rows]
    ratios = sorted(r["ratio"] for r in rows)
    summary = {"pairs": rows, "median_ratio": statistics.median(ratios),
               "baseline_spread": max(base) / min(base) - 1}
    print(f"PyTorch: throughput with seqpointd / without, median of {len(rows)} pairs: "
          f"{summary['median_ratio']:.4f} (pairs {ratios[0]:.4f} .. {ratios[-1]:.4f}); noise floor: "
          f"the baselines' own spread max/min - 1 = {100 * summary['baseline_spread']:.2f}%")
    return summary


def share(args, out):
    seqpoint = args.seqpoint
    gen = os.path.join(args.build, "bench", "trace_gen")
    rows = []
    top = 5 if args.quick else 6
    for e in range(3, top + 1):
        n = 10 ** e
        trace = f"{out}/trace-{n}.csv"
        subprocess.run([gen, str(n), trace], check=True, stdout=subprocess.DEVNULL)
        cmd = [seqpoint, "select", "--trace", trace, "--online", "--json"] + args.select_args
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        sel = json.loads(r.stdout)
        m = int(sel["measured"])
        rows.append({"iterations": n, "measured": m, "share": round(m / n, 6)})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 s per cell, total rate <= 20,000/s, share up to 10^5")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seqpointd", help="the daemon to measure (default BUILD/agent/daemon/seqpointd)")
    ap.add_argument("--seqpoint", help="the CLI (default BUILD/agent/cli/seqpoint)")
    ap.add_argument("--conf", action="append", default=[],
                    help="a [runs] config line for seqpointd, e.g. 'budget_per_doubling = 0' (repeatable)")
    ap.add_argument("--seconds", type=float, help="per cell (default 4, 1 with --quick)")
    ap.add_argument("--max-total-rate", type=float, help="skip cells above this many iterations/s in all")
    ap.add_argument("--work-us", type=int, default=20, help="busy work per iteration (default 20)")
    ap.add_argument("--select-arg", dest="select_args", action="append", default=[],
                    help="extra `seqpoint select --online` argument for the share (repeatable)")
    ap.add_argument("--share-only", action="store_true", help="only the measured share (no probes, no root)")
    ap.add_argument("--torch-pairs", type=int, help="PyTorch runs with and without (default 4, 2 with --quick; 0: none)")
    ap.add_argument("--torch-iterations", type=int, help="timed PyTorch iterations per run (default 400, 200 with --quick)")
    ap.add_argument("--cells", help="only these cells, e.g. '1x10000,64x10000'")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    args.seconds = args.seconds or (1.0 if args.quick else 4.0)
    args.max_total_rate = args.max_total_rate or (20000 if args.quick else 100000)
    if args.torch_pairs is None:
        args.torch_pairs = 2 if args.quick else 4
    args.torch_iterations = args.torch_iterations or (200 if args.quick else 400)
    args.seqpointd = args.seqpointd or os.path.join(args.build, "agent", "daemon", "seqpointd")
    args.seqpoint = args.seqpoint or os.path.join(args.build, "agent", "cli", "seqpoint")
    if args.share_only:
        out = tempfile.mkdtemp(prefix="seqpoint-cost.")
        for r in share(args, out):
            print(f"  {r['iterations']:>8} iterations: {r['measured']:>6} measured ({100 * r['share']:.3f}%)")
        return
    if os.geteuid() != 0:
        sys.exit("cost_bench: needs root (eBPF probes)")
    for b in (args.seqpointd, args.seqpoint):
        if not os.access(b, os.X_OK):
            sys.exit(f"cost_bench: no {b}: build seqpointd and seqpoint (or pass --build)")
    out = tempfile.mkdtemp(prefix="seqpoint-cost.")
    loop = f"{out}/cost_loop"
    subprocess.run(["cc", "-O2", "-I", os.path.join(ROOT, "sdk", "include"),
                    os.path.join(ROOT, "bench", "cost", "cost_loop.c"), "-o", loop], check=True)
    cells, skipped = [], []
    print(f"cost_bench: {args.seqpointd}, {args.seconds} s per cell, {args.work_us} us of work "
          f"per iteration; files in {out}")
    print("added time: the iteration's own time with the agent less the baseline's (mean / p50), ns; "
          "noise: the baseline's p90 - p50")
    print("loop p50/p99/max: the daemon's loop latency for events that wake it (probe stamp to handling), "
          "us, and how many; achieved: iterations/s in all without / with the agent")
    print(f"{'procs':>5} {'it/s':>6} {'iters':>7} {'base p50':>8} {'noise':>6} {'+unmeas':>13} "
          f"{'+meas':>13} {'meas':>5} {'share':>7} {'cpu ms/1k':>9} {'%core':>6} {'RSS KiB':>8} "
          f"{'loop p50/p99/max (n)':>24} {'achieved':>15}")
    for procs in (1, 8, 64):
        for rate in (10, 100, 1000, 10000):
            if args.cells and f"{procs}x{rate}" not in args.cells.split(","):
                continue
            # The largest cell runs saturated (as fast as this machine drives it); the others
            # above the limit are skipped.
            saturate = procs * rate > args.max_total_rate
            if saturate and (procs, rate) != (64, 10000):
                skipped.append(f"{procs}x{rate}")
                continue
            c = cell(args, loop, procs, rate, out, saturate)
            cells.append(c)
            print(f"{procs:>5} {rate:>6} {c['iterations']:>7} {c['baseline_p50_ns']:>8} "
                  f"{c['noise_p50_p90_ns']:>6} "
                  f"{str(c['added_unmeasured_mean_ns']) + '/' + str(c['added_unmeasured_p50_ns']):>13} "
                  f"{str(c['added_measured_mean_ns']) + '/' + str(c['added_measured_p50_ns']):>13} "
                  f"{c['measured']:>5} {c['measured_share']:>7} "
                  f"{c['daemon_cpu_ms_per_1000']:>9} {c['daemon_cpu_pct_core']:>6} "
                  f"{c['daemon_rss_kib']:>8} "
                  f"{'%s/%s/%s (%d)' % (c['loop_latency_p50_us'], c['loop_latency_p99_us'], c['loop_latency_max_us'], c['loop_latency_n']):>24} "
                  f"{'%d/%d' % (c['achieved_base_it_s'], c['achieved_agent_it_s']):>15}"
                  + (" saturated" if c["saturated"] else ""), flush=True)
    if skipped:
        print("skipped (total rate above --max-total-rate): " + ", ".join(skipped))
    torch_summary = torch_pairs(args, out) if args.torch_pairs > 0 else None
    rows = share(args, out)
    print("measured share, `seqpoint select --online` on trace_gen traces:")
    for r in rows:
        print(f"  {r['iterations']:>8} iterations: {r['measured']:>6} measured ({100 * r['share']:.3f}%)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cells": cells, "skipped": skipped, "torch": torch_summary, "share": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
