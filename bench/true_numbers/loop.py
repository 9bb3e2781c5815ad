#!/usr/bin/python3
"""The workload of bench/true_numbers.py: a small LSTM or GRU language-model loop in PyTorch on
the CPU, each iteration marked with seqpoint_probe, writing its own reading of every iteration
to a CSV: iter,seq_len,wall_ns,cpu_ns.

The reading is taken right beside the marks: CLOCK_MONOTONIC and CLOCK_PROCESS_CPUTIME_ID (the
CPU time of every thread of this process, the intra-op pool included) just after the begin
mark and just before the end mark, so it covers the same window the agent measures, less a
ctypes call at each end (microseconds). Batches come either from the loop itself or from a
multi-process DataLoader (--workers N: its workers are other processes, not counted in this
process's CPU time).

    python3 loop.py --threads 4 --iterations 350 --csv out.csv [--start-iter 50000]
"""

import argparse
import csv
import os
import random
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
        probe.iteration_begin(it, sl, BATCH, BATCH * sl)
        w0 = time.clock_gettime_ns(mono)
        c0 = time.clock_gettime_ns(cpu)
        opt.zero_grad()
        logits = model(x[:, :-1])
        loss = loss_fn(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        c1 = time.clock_gettime_ns(cpu)
        w1 = time.clock_gettime_ns(mono)
        probe.iteration_end(it)
        rows.append((it, sl, w1 - w0, c1 - c0, w0, w1))
    with open(a.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(("iter", "seq_len", "wall_ns", "cpu_ns", "mono_begin_ns", "mono_end_ns"))
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
