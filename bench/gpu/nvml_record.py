#!/usr/bin/env python3
"""Records how NVML behaves on a real GPU, for the agent's tests to replay (bench/gpu/prove.sh).

  nvml_record.py OUT_DIR [--seconds S]

Writes, for GPU 0:
  nvml_energy.csv  phase,t0_ns,t1_ns,energy_mj,power_mw: nvmlDeviceGetTotalEnergyConsumption read
                   back to back for S seconds idle, then S seconds under a matrix-product load
                   (PyTorch), each read bracketed by CLOCK_MONOTONIC (t0 before, t1 after): the
                   read's cost, and how often the counter's value actually changes (its update
                   period), which decide what energy over a short window can be stood behind.
  nvml_calls.csv   call,reads,mean_us,p50_us,max_us: the cost of each NVML call the agent's
                   collector makes per window (collectors/nvml/nvml_library.cpp), 50 reads each.
  nvml_gpm.txt     nvmlGpmQueryDeviceSupport's answer (GPM: Hopper and later).
NVML through ctypes only: no package beyond PyTorch (for the load) is needed.
"""
import argparse
import ctypes
import os
import statistics
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    if nvml.nvmlInit_v2() != 0:
        print("nvml_record: nvmlInit failed", file=sys.stderr)
        return 1
    dev = ctypes.c_void_p()
    nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev))
    mono = time.monotonic_ns

    def energy():
        mj = ctypes.c_ulonglong()
        return mj.value if nvml.nvmlDeviceGetTotalEnergyConsumption(dev, ctypes.byref(mj)) == 0 else -1

    def power():
        mw = ctypes.c_uint()
        return mw.value if nvml.nvmlDeviceGetPowerUsage(dev, ctypes.byref(mw)) == 0 else -1

    rows = []

    def record(phase):
        end = mono() + int(args.seconds * 1e9)
        while mono() < end:
            t0 = mono()
            e = energy()
            t1 = mono()
            rows.append((phase, t0, t1, e, power()))

    record("idle")
    stop = threading.Event()

    def load():
        import torch
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        while not stop.is_set():
            for _ in range(20):
                a @ a
            torch.cuda.synchronize()

    th = threading.Thread(target=load, daemon=True)
    th.start()
    time.sleep(3.0)  # CUDA init and the first products
    record("load")
    stop.set()
    th.join(timeout=10)
    with open(os.path.join(args.out, "nvml_energy.csv"), "w") as f:
        f.write("phase,t0_ns,t1_ns,energy_mj,power_mw\n")
        for r in rows:
            f.write("%s,%d,%d,%d,%d\n" % r)

    # The per-window calls of the collector, timed.
    class Util(ctypes.Structure):
        _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]

    class Mem(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

    u, m, c = Util(), Mem(), ctypes.c_uint()
    procs = (ctypes.c_byte * (64 * 64))()
    n = ctypes.c_uint(64)
    calls = {
        "nvmlDeviceGetTotalEnergyConsumption": energy,
        "nvmlDeviceGetPowerUsage": power,
        "nvmlDeviceGetUtilizationRates": lambda: nvml.nvmlDeviceGetUtilizationRates(dev, ctypes.byref(u)),
        "nvmlDeviceGetMemoryInfo": lambda: nvml.nvmlDeviceGetMemoryInfo(dev, ctypes.byref(m)),
        "nvmlDeviceGetClockInfo(SM)": lambda: nvml.nvmlDeviceGetClockInfo(dev, 1, ctypes.byref(c)),
        "nvmlDeviceGetComputeRunningProcesses_v3":
            lambda: nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, ctypes.byref(n), procs),
    }
    with open(os.path.join(args.out, "nvml_calls.csv"), "w") as f:
        f.write("call,reads,mean_us,p50_us,max_us\n")
        for name, fn in calls.items():
            ts = []
            for _ in range(50):
                n.value = 64
                t0 = mono()
                fn()
                ts.append((mono() - t0) / 1e3)
            f.write("%s,%d,%.1f,%.1f,%.1f\n" % (name, len(ts), statistics.mean(ts),
                                                statistics.median(ts), max(ts)))

    class GpmSupport(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint), ("isSupportedDevice", ctypes.c_uint)]

    s = GpmSupport(1, 0)
    rc = nvml.nvmlGpmQueryDeviceSupport(dev, ctypes.byref(s))
    name = ctypes.create_string_buffer(96)
    nvml.nvmlDeviceGetName(dev, name, 96)
    with open(os.path.join(args.out, "nvml_gpm.txt"), "w") as f:
        f.write("gpu %s: nvmlGpmQueryDeviceSupport rc %d isSupportedDevice %d\n"
                % (name.value.decode(), rc, s.isSupportedDevice))
    changes = sum(1 for a, b in zip(rows, rows[1:]) if a[0] == b[0] and b[3] != a[3])
    print("nvml_record: %d reads, %d value changes, mean read %.0f us" % (
        len(rows), changes, statistics.mean((r[2] - r[1]) / 1e3 for r in rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
