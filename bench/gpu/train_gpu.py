#!/usr/bin/env python3
"""Real PyTorch training on CUDA for bench/gpu/prove.sh, timing every iteration itself.

  train_gpu.py gru|transformer --out CSV [--seconds-per-sl S] [--sls 32,64,128,256]

gru:          a 2-layer GRU encoder and a GRU decoder (nn.GRU: cuDNN's RNN API, so the agent's
              zero-code cudnn9-rnn preset sees it with no change here), Adam.
transformer:  a small nn.TransformerEncoder language model, each iteration marked with the
              seqpoint_probe module (PYTHONPATH=<bundle>/python).
Phases of fixed SL, each about S seconds of consecutive iterations (GPM values need windows of
2 s or more: a phase is the aggregate the agent's per-SL GPM figures are compared with).
Every iteration ends with loss.item() (a device-to-host copy: the CPU waits for the GPU, so the
agent's CPU-side window closes after the GPU work; see collectors/README.md, "CPU window vs GPU
timeline"). Per iteration the CSV has: iter, seq_len, cuda_ms (torch.cuda.Event elapsed time,
start event before the forward, end event after the optimizer step), wall_ns, and per phase the
GPU's energy from NVML (mJ, nvmlDeviceGetTotalEnergyConsumption through ctypes), the GPU's UUID,
and end_mono_ns: CLOCK_MONOTONIC at the iteration's CPU end as the agent sees it (the marked
block's exit; for the zero-code GRU, before loss.item(), near the preset's boundary call), for
seqpoint-syncwatch's per-window sync verdicts.
"""
import argparse
import contextlib
import csv
import ctypes
import sys
import time

import torch
import torch.nn as nn


def nvml_energy_reader(index):
    """A function returning the GPU's total energy in mJ, or None without NVML."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return lambda: None
        handle = ctypes.c_void_p()
        if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0:
            return lambda: None

        def read():
            mj = ctypes.c_ulonglong()
            return mj.value if nvml.nvmlDeviceGetTotalEnergyConsumption(handle, ctypes.byref(mj)) == 0 else None
        return read
    except OSError:
        return lambda: None


class Seq2Seq(nn.Module):
    def __init__(self, vocab=4000, hidden=512):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.enc = nn.GRU(hidden, hidden, num_layers=2, batch_first=True)
        self.dec = nn.GRU(hidden, hidden, num_layers=1, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src, tgt):
        _, h = self.enc(self.emb(src))
        y, _ = self.dec(self.emb(tgt), h[-1:].contiguous())
        return self.out(y)


class TinyLM(nn.Module):
    def __init__(self, vocab=4000, d=256, layers=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True)
        self.body = nn.TransformerEncoder(layer, layers)
        self.out = nn.Linear(d, vocab)

    def forward(self, x):
        return self.out(self.body(self.emb(x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["gru", "transformer"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds-per-sl", type=float, default=15.0)
    ap.add_argument("--sls", default="32,64,128,256")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--micro-batches", type=int, default=1,
                    help="forward/backward passes accumulated per iteration (one optimizer step): "
                         "long iterations, for GPU counters that need windows of seconds (GPM)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("train_gpu: no CUDA device", file=sys.stderr)
        return 3
    dev = torch.device("cuda:0")
    torch.backends.cudnn.enabled = True
    props = torch.cuda.get_device_properties(dev)
    uuid = str(getattr(props, "uuid", ""))
    energy = nvml_energy_reader(torch.cuda.current_device())
    mark = None
    if args.model == "transformer":
        import seqpoint_probe  # the bundle's python/ on PYTHONPATH
        mark = seqpoint_probe.iteration
        print("train_gpu: seqpoint_probe available=%s" % seqpoint_probe.available(), flush=True)
    model = (Seq2Seq() if args.model == "gru" else TinyLM()).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    sls = [int(s) for s in args.sls.split(",")]
    rows, it = [], 0
    for sl in sls:
        e0, t_phase = energy(), time.monotonic()
        while time.monotonic() - t_phase < args.seconds_per_sl:
            src = torch.randint(0, 4000, (args.batch, sl), device=dev)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ctx = mark(seq_len=sl, batch=args.batch) if mark else contextlib.nullcontext()
            t0 = time.monotonic_ns()
            with ctx:
                start.record()
                opt.zero_grad(set_to_none=True)
                for _ in range(args.micro_batches):
                    if args.model == "gru":
                        logits = model(src, src)
                    else:
                        logits = model(src)
                    loss = loss_fn(logits.reshape(-1, logits.shape[-1]), src.reshape(-1))
                    loss.backward()
                opt.step()
                end.record()
                if mark is None:  # the zero-code GRU: its iteration ends at the preset's
                    t_end = time.monotonic_ns()  # boundary, before this sync
                loss.item()  # D2H copy: waits for the GPU
            if mark is not None:  # the marked iteration ends as its `with` block exits
                t_end = time.monotonic_ns()
            rows.append([it, sl, start.elapsed_time(end), time.monotonic_ns() - t0, "", uuid, t_end])
            it += 1
        e1 = energy()
        if e0 is not None and e1 is not None:
            rows[-1][4] = e1 - e0  # the phase's energy, on its last row
        print("train_gpu: SL %d: %d iterations" % (sl, sum(1 for r in rows if r[1] == sl)), flush=True)
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")  # seqpoint-syncwatch reads plain \n lines
        w.writerow(["iter", "seq_len", "cuda_ms", "wall_ns", "phase_energy_mj", "gpu_uuid",
                    "end_mono_ns"])
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
