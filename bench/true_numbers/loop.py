#!/usr/bin/python3
"""The workload of bench/true_numbers.py: a small LSTM or GRU language-model loop in PyTorch on
the CPU, each iteration marked with seqpoint_probe, writing its own reading of every iteration
to a CSV: iter,seq_len,wall_ns,cpu_ns,threads_ns,mono_begin_ns,mono_end_ns,switches
(switches: the process's context switches inside the thread clock reads, getrusage).

The reading is taken right beside the marks: CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID (cpu_ns)
and every thread's own CPU clock, summed (threads_ns: the intra-op pool included) just after the
begin mark and just before the end mark, so it covers the same window the agent measures, less
the reads themselves at each end (tens of microseconds). threads_ns is the reference: the
process clock reads a sibling running on another CPU as of that CPU's last tick. Batches come either from the loop itself or from a
multi-process DataLoader (--workers N: its workers are other processes, not counted in this
process's CPU time).

    python3 loop.py --threads 4 --iterations 350 --csv out.csv [--start-iter 50000]
"""

import argparse
import csv
import os
import random
import resource
import sys
import time

import torch

import seqpoint_probe as probe

SLS = (8, 16, 24, 32, 48, 64)
VOCAB = 1000
BATCH = 16


class Batches(torch.utils.data.IterableDataset):
    """Random token batches of a random padded length; with workers, each worker its share."""

    def __init__(self, n, seed):
        self.n, self.seed = n, seed

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        rng = random.Random(self.seed * 1000 + wid)
        for i in range(wid, self.n, nw):
            sl = rng.choice(SLS)
            x = torch.randint(0, VOCAB, (BATCH, sl + 1), generator=torch.Generator().manual_seed(
                self.seed * 100003 + i))
            yield sl, x


class Model(torch.nn.Module):
    def __init__(self, cell, hidden):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, hidden)
        rnn = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
        self.rnn = rnn(hidden, hidden, batch_first=True)
        self.out = torch.nn.Linear(hidden, VOCAB)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


def thread_clock(tid):
    """The CPU clock of thread `tid` of this process (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED))."""
    return ((~tid) << 3) | 6


def switches():
    """The process's context switches so far, every thread's, ended ones too (getrusage: the
    nvcsw + nivcsw that the kernel counts where sched_switch fires, as the probes count them)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_nvcsw + ru.ru_nivcsw


def task_ids():
    return [int(name) for name in os.listdir("/proc/self/task")]


def threads_cpu_ns(tids):
    """The own CPU clocks of threads `tids`: {tid: ns} (a thread that ended is missing). Unlike
    CLOCK_PROCESS_CPUTIME_ID, which for a sibling on another CPU reads its runtime as of that
    CPU's last tick (up to 4 ms old at HZ=250: kernel/sched/cputime.c, thread_group_cputime), a
    thread's clock brings a running thread's runtime up to now (task_sched_runtime).
    Only clock reads here: listing /proc/self/task costs tens of microseconds, so the lists are
    made outside the window (before the begin mark) or after the known threads were read."""
    out = {}
    for tid in tids:
        try:
            out[tid] = time.clock_gettime_ns(thread_clock(tid))
        except OSError:  # ended
            pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=350)
    ap.add_argument("--start-iter", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--model", choices=("lstm", "gru"), default="lstm")
    ap.add_argument("--hidden", type=int, default=96)
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="stop after this long (0: no limit): spinning pools can be slow")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--wait", action="store_true", help="read a line on stdin before starting")
    a = ap.parse_args()
    if not probe.available():
        print("loop.py: seqpoint_probe markers unavailable (libseqpoint_usdt.so not loaded)",
              file=sys.stderr)
        return 3
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = Model(a.model, a.hidden)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = torch.utils.data.DataLoader(Batches(a.iterations, a.seed), batch_size=None,
                                         num_workers=a.workers)
    if a.wait:
        sys.stdin.readline()
    mono, cpu = time.CLOCK_MONOTONIC, time.CLOCK_PROCESS_CPUTIME_ID
    rows = []
    stop = time.monotonic() + a.max_seconds if a.max_seconds > 0 else float("inf")
    for i, (sl, x) in enumerate(loader):
        if time.monotonic() > stop:
            break
        it = a.start_iter + i
        tids = task_ids()
        probe.iteration_begin(it, sl, BATCH, BATCH * sl)
        w0 = time.clock_gettime_ns(mono)
        c0 = time.clock_gettime_ns(cpu)
        t0 = threads_cpu_ns(tids)
        s0 = switches()
        opt.zero_grad()
        logits = model(x[:, :-1])
        loss = loss_fn(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        s1 = switches()
        t1 = threads_cpu_ns(tids)
        c1 = time.clock_gettime_ns(cpu)
        w1 = time.clock_gettime_ns(mono)
        probe.iteration_end(it)
        # Threads born inside the window (rare: the pools live as long as the process), read
        # after the end mark so that listing them is outside it.
        t1.update(threads_cpu_ns([tid for tid in task_ids() if tid not in t0]))
        # A thread born inside the window counts from 0; one that ended inside cannot be read
        # any more: then -1, and the harness falls back to the process clock.
        threads = (sum(v - t0.get(tid, 0) for tid, v in t1.items())
                   if all(tid in t1 for tid in t0) else -1)
        rows.append((it, sl, w1 - w0, c1 - c0, threads, w0, w1, s1 - s0))
    with open(a.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(("iter", "seq_len", "wall_ns", "cpu_ns", "threads_ns", "mono_begin_ns",
                    "mono_end_ns", "switches"))
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
