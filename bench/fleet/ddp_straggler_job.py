#!/usr/bin/python3
"""A real data-parallel PyTorch job (DistributedDataParallel over gloo, on the CPU) with one rank
made to straggle, for the straggler probes (agent/fleet/straggler.h): run by
agent/fleet/straggler_ddp_test and bench/fleet/stragglers.sh.

    /usr/bin/python3 bench/fleet/ddp_straggler_job.py --ranks 4 --steps 60 \\
        --slow-rank 2 --slow-ms 40 --trace-dir /tmp/ddp

Each rank trains a token-wise MLP (embedding, two linear layers) whose compute grows with the
tokens of its batch (SL x batch); the model is wrapped in DDP, so every step's backward
all-reduces the gradients through c10d::ProcessGroupGloo::allreduce. SLs: every rank draws its SL
per step uniformly from [--sl-min, --sl-max] (no systematic imbalance), except:
  --slow-rank R --slow-ms MS   rank R sleeps MS inside its forward pass every step: a slow rank
                               at the same SL (what slow hardware looks like from outside)
  --slow-rank R --slow-factor F rank R's compute before the collective lasts F times as long:
                               in the DDP communication hook (called when the rank arrives at
                               the all-reduce) it spins, on the CPU, (F - 1) x its compute so far
                               in the step, then all-reduces (a rank F times as slow, exactly)
  --slow-from N                the slowdown starts at step N (a change point after steady state)
  --long-rank R --long-factor F  rank R's SL is F times the draw: a rank fed longer sequences
  --batching bucketed          every rank draws the same SL per step (length-bucketed batches);
                               random (the default): each rank draws its own
Iterations are marked with seqpoint_probe (sdk/python) when it loads. Each rank writes
<trace-dir>/rank<r>.csv: iter,seq_len,tokens,mono_begin_ns,mono_backward_ns,mono_end_ns,
mono_arrival_ns (CLOCK_MONOTONIC; mono_backward_ns: just before loss.backward();
mono_arrival_ns: when the DDP hook all-reduced the step's first bucket, after any slowdown's spin:
the workload's own reading of its arrival at the collective).

Protocol (for tests): the launcher prints "ready <pid> <pid> ..." once every rank has built its
DDP model, then waits for a line on stdin before the ranks start their steps; exit status 0
when every rank finished. Needs only Python 3 and torch (Debian's python3-torch).
"""

import argparse
import os
import random
import socket
import subprocess
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--sl-min", type=int, default=56)
    p.add_argument("--sl-max", type=int, default=64)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=0.0)
    p.add_argument("--slow-factor", type=float, default=1.0)
    p.add_argument("--slow-from", type=int, default=0)
    p.add_argument("--batching", choices=["random", "bucketed"], default="random")
    p.add_argument("--long-rank", type=int, default=-1)
    p.add_argument("--long-factor", type=float, default=1.0)
    p.add_argument("--trace-dir", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-wait", action="store_true", help="start at once (no ready/go)")
    p.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    return p.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    port = free_port()
    ranks = []
    for r in range(args.ranks):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                   WORLD_SIZE=str(args.ranks), OMP_NUM_THREADS="1",
                   # As torchrun sets them: the agent groups the ranks as one data-parallel run.
                   LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(args.ranks))
        cmd = [sys.executable, os.path.abspath(__file__), "--rank", str(r)] + sys.argv[1:]
        ranks.append(subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True))
    for p in ranks:
        if p.stdout.readline().strip() != "ready":
            for q in ranks:
                q.kill()
            sys.exit("ddp_straggler_job: a rank failed to start")
    print("ready " + " ".join(str(p.pid) for p in ranks), flush=True)
    if not args.no_wait:
        sys.stdin.readline()
    for p in ranks:
        p.stdin.write("go\n")
        p.stdin.flush()
    rc = max(p.wait() for p in ranks)
    print("done", flush=True)
    sys.exit(rc)


def rank_main(args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    try:
        import seqpoint_probe
        marker = seqpoint_probe.iteration
    except ImportError:
        marker = None
    torch.set_num_threads(1)
    r = args.rank
    dist.init_process_group("gloo", rank=r, world_size=args.ranks)
    torch.manual_seed(args.seed)
    vocab = 512
    model = torch.nn.Sequential(
        torch.nn.Embedding(vocab, args.hidden), torch.nn.Linear(args.hidden, 4 * args.hidden),
        torch.nn.ReLU(), torch.nn.Linear(4 * args.hidden, args.hidden),
        torch.nn.Linear(args.hidden, vocab))
    ddp = DDP(model)
    # The step's arrival at the collective, read by the workload itself; the slow rank's spin.
    arrival = {"t0": 0, "at": 0, "slow": False}

    def hook(state, bucket):
        if arrival["at"] == 0:
            now = time.monotonic_ns()
            if arrival["slow"]:
                until = now + int((args.slow_factor - 1) * (now - arrival["t0"]))
                while time.monotonic_ns() < until:
                    pass
            arrival["at"] = time.monotonic_ns()
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0] / args.ranks)

    ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    rng = random.Random(args.seed * 1000 + r)
    shared = random.Random(args.seed * 1000 + 999)  # bucketed: the same draw on every rank
    print("ready", flush=True)
    sys.stdin.readline()
    # Written row by row, flushed: a test that stops the ranks mid-job (SIGSTOP) reads the
    # workload's own reading of every step they ran.
    os.makedirs(args.trace_dir, exist_ok=True)
    trace = open(os.path.join(args.trace_dir, "rank%d.csv" % r), "w")
    trace.write("iter,seq_len,tokens,mono_begin_ns,mono_backward_ns,mono_end_ns,mono_arrival_ns\n")
    for step in range(args.steps):
        common = shared.randint(args.sl_min, args.sl_max)
        sl = common if args.batching == "bucketed" else rng.randint(args.sl_min, args.sl_max)
        if r == args.long_rank:
            sl = int(sl * args.long_factor)
        x = torch.randint(0, vocab, (args.batch, sl))
        tokens = args.batch * sl
        ctx = marker(seq_len=sl, batch=args.batch, tokens=tokens) if marker else None
        if ctx:
            ctx.__enter__()
        if r == args.slow_rank and step == args.slow_from and args.slow_factor > 1:
            # For a live bench's clock (bench/fleet/run.sh): when the slowdown began.
            print("slowdown %g from step %d at %.3f" % (args.slow_factor, step, time.time()),
                  file=sys.stderr, flush=True)
        t0 = time.monotonic_ns()
        arrival.update(t0=t0, at=0, slow=(r == args.slow_rank and step >= args.slow_from
                                          and args.slow_factor > 1))
        out = ddp(x)
        if r == args.slow_rank and args.slow_ms > 0 and step >= args.slow_from:
            time.sleep(args.slow_ms / 1000.0)
        loss = torch.nn.functional.cross_entropy(out.view(-1, vocab), x.view(-1))
        t1 = time.monotonic_ns()
        opt.zero_grad()
        loss.backward()
        opt.step()
        t2 = time.monotonic_ns()
        if ctx:
            ctx.__exit__(None, None, None)
        trace.write(",".join(str(v) for v in (step, sl, tokens, t0, t1, t2, arrival["at"])) + "\n")
        trace.flush()
    trace.close()
    dist.barrier()  # every rank's trace is written before any rank's store goes away
    dist.destroy_process_group()
    # PyTorch 1.13's gloo group can deadlock at interpreter exit: the Reducer's destructor joins a
    # gloo worker that waits for the GIL the destructor holds, while the store's client thread
    # spins on rank 0's closed socket. Nothing is left to run: leave without the destructors.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    args = parse()
    if args.rank is None:
        launch(args)
    else:
        rank_main(args)


if __name__ == "__main__":
    main()
