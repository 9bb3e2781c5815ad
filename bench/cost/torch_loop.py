#!/usr/bin/python3
"""The cost bench's PyTorch trainer: a small LSTM language model trained on the CPU with one
intra-op thread, every iteration marked with seqpoint_probe (one `with` per iteration, as the
SDK's README shows). Prints one JSON line: iterations, seconds and iterations per second over
the timed part (after --warmup iterations, which are left out: allocator and autograd warm-up).

    python3 torch_loop.py --iterations 400 [--warmup 30] [--threads 1] [--seed 1]
"""
import argparse
import json
import random
import time

# The marker library is loaded first, so the agent attaches while torch imports (a second or
# more): the timed iterations are all watched ones.
import seqpoint_probe as probe

import torch

SLS = (8, 16, 24, 32)
VOCAB, HIDDEN, BATCH = 256, 64, 8


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, HIDDEN)
        self.rnn = torch.nn.LSTM(HIDDEN, HIDDEN, batch_first=True)
        self.out = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    # The batches are made before the loop: the loop times training, not data generation.
    batches = []
    for _ in range(a.warmup + a.iterations):
        sl = rng.choice(SLS)
        batches.append((sl, torch.randint(0, VOCAB, (BATCH, sl + 1))))
    t0 = None
    for i, (sl, x) in enumerate(batches):
        if i == a.warmup:
            t0 = time.perf_counter()
        with probe.iteration(seq_len=sl, batch=BATCH, tokens=BATCH * sl):
            opt.zero_grad()
            y = model(x[:, :-1])
            loss = loss_fn(y.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
    s = time.perf_counter() - t0
    print(json.dumps({"iterations": a.iterations, "seconds": s, "it_per_s": a.iterations / s,
                      "probes": probe.available()}))


if __name__ == "__main__":
    main()
