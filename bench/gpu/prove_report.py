#!/usr/bin/env python3
"""bench/gpu/prove.sh's comparison of one run: the agent's view against the trainer's own.

  prove_report.py MODEL TRAINER_CSV SHOW_JSON [REPORT_JSON [SYNC_TXT]]

Prints: iterations and SLs (the agent's histogram against the trainer's CSV, per SL); which
GPU the run was measured on (the device of its nvml samples) against the trainer's UUID; GPM
values per SeqPoint beside NVML's; each projection against the trainer's own total (time from
its CUDA events; energy from NVML per phase); per measured window (the report's iterations)
whether a CUDA sync closed it, from SYNC_TXT (seqpoint-syncwatch classify: one line per trainer
iteration and a summary). Keys missing from the agent's JSON are reported
as missing, never guessed.
"""
import collections
import csv
import json
import sys


def print_devices(rows, show, report):
    """The GPUs the agent's NVML values name (each report row's `device`, else `show`'s
    `devices`), against the trainer's own UUID."""
    uuid = rows[0]["gpu_uuid"] if rows else ""
    devices = sorted({m.get("device") or "" for m in report.get("measurements", [])
                      if str(m.get("metric", "")).startswith("nvml:")} - {""})
    if not devices:
        devices = sorted(d.get("device", "") for d in show.get("devices", [])
                         if "nvml" in d.get("collectors", []))
    if not devices:
        unrecorded = show.get("devices_not_recorded", 0)
        why = ("%d values stored by a seqpointd before store schema 9" % unrecorded if unrecorded
               else "no NVML value measured")
        print("   GPU: trainer on %s; agent measured on no named GPU (%s)" % (uuid or "?", why))
        return
    # Under MIG a device is "<uuid>/gi<G>/ci<C>": the trainer's GPU is its UUID part.
    ours = any(d == uuid or d.startswith(uuid + "/") for d in devices)
    same = "the trainer's GPU" if ours else "NOT the trainer's GPU"
    print("   GPU: trainer on %s; agent measured %s (%s)" % (uuid or "?", ", ".join(devices),
                                                          same if uuid else "trainer's UUID unknown"))


def main():
    model, trainer_csv, show_json = sys.argv[1:4]
    report = json.load(open(sys.argv[4])) if len(sys.argv) > 4 else {}
    sync_lines = open(sys.argv[5]).read().splitlines() if len(sys.argv) > 5 else []
    rows = list(csv.DictReader(open(trainer_csv)))
    show = json.load(open(show_json))
    want = collections.Counter(int(r["seq_len"]) for r in rows)
    got = collections.Counter()
    for b in show.get("histogram", []):
        got[int(b["seq_len"])] += int(b["count"])
    print("== %s: %d iterations by the trainer, %d seen by the agent" %
          (model, sum(want.values()), sum(got.values())))
    exact = True
    for sl in sorted(set(want) | set(got)):
        ok = want[sl] == got[sl]
        exact &= ok
        print("   SL %5d: trainer %5d  agent %5d  %s" % (sl, want[sl], got[sl], "exact" if ok else "DIFFERENT"))
    print("   iterations and SLs: %s" % ("EXACT" if exact else "NOT EXACT"))
    print_devices(rows, show, report)
    # GPM beside NVML per SeqPoint and GPU (from the report's measurements, when it lists them).
    per_sp = collections.defaultdict(dict)
    for m in report.get("measurements", []):
        name = str(m.get("metric", ""))
        if name.startswith("nvml:"):
            per_sp[(m.get("seq_len", "?"), m.get("device") or name.split(":")[1])][name.split(":", 2)[-1]] = m.get("value")
    for sl, device in sorted(per_sp, key=str):
        v = per_sp[(sl, device)]
        gpm = {k: v[k] for k in ("sm_active", "tensor_active", "dram_active", "fp32_active") if k in v}
        nvml = {k: v[k] for k in ("util_gpu", "power", "sm_clock") if k in v}
        print("   SL %s on %s: GPM %s | NVML %s" % (sl, device, gpm or "(none: window < 2 s or not Hopper+)", nvml))
    # Per measured iteration: the agent's time against the trainer's own wall time of the same
    # iteration (the marked block: ~1; zero-code with the default window=calls: from the last
    # boundary call of the previous burst to this one's first, so the encoder's backward between
    # the decoder's and the encoder's backward-weights calls falls outside; cudnn9-rnn:step tiles
    # the run: the whole step, probes/README.md).
    wall = {int(r["iter"]): int(r["wall_ns"]) for r in rows}
    ratios = sorted(m["value"] / wall[m["iter"]] for m in report.get("measurements", [])
                    if m.get("metric") == "time_ns" and m.get("iter") in wall and wall[m["iter"]] > 0)
    if ratios:
        q = lambda f: ratios[min(len(ratios) - 1, int(f * len(ratios)))]
        print("   time per measured iteration, agent / trainer's wall time: %d iterations, "
              "p10 %.3f median %.3f p90 %.3f" % (len(ratios), q(0.1), q(0.5), q(0.9)))
    time_ms = sum(float(r["cuda_ms"]) for r in rows)
    energy_mj = sum(float(r["phase_energy_mj"]) for r in rows if r["phase_energy_mj"])
    for metric, p in show.get("projections", {}).items():
        total, low, high = p.get("total"), p.get("low"), p.get("high")
        own = ""
        if metric == "time_ns":
            own = "trainer's CUDA events %.3f s (%+.1f%%)" % (time_ms / 1e3, 100 * (total / 1e9 - time_ms / 1e3) / (time_ms / 1e3))
        elif (metric.endswith(":energy") or metric == "energy_uj") and energy_mj and total is not None:
            own = "trainer's NVML %.1f J (%+.1f%%)" % (energy_mj / 1e3, 100 * (total / 1e6 - energy_mj / 1e3) / (energy_mj / 1e3))
        if total is None or p.get("left_out"):
            print("   projection %-28s left out: %s" % (metric, p.get("left_out_detail") or p.get("left_out") or "no total"))
            continue
        if p.get("bounded") is False:
            own += " (unbounded: the agent prints no total)"
        print("   projection %-28s %14.6g [%s, %s] %s" % (metric, total, low, high, own))
    print_sync(report, sync_lines)


def print_sync(report, lines):
    """Per measured window: closed by a sync or not (the agent's iteration numbers; a zero-code
    run counts from its attach, so a few may not match the trainer's)."""
    if not lines:
        return
    by_iter = {}
    for line in lines:
        head = line.strip().split(":", 1)[0]
        if head.startswith("window iter "):
            by_iter[head[len("window iter "):]] = line.strip()
    measured = sorted({str(m.get("iter")) for m in report.get("measurements", [])}, key=lambda x: int(x) if x.isdigit() else -1)
    shown = 0
    for it in measured:
        if it in by_iter:
            print("   measured " + by_iter[it])
            shown += 1
    if measured and not shown:
        print("   measured windows: none matched the trainer's iteration numbers")
    for line in lines:
        if "sync-closed windows" in line or "not measured" in line:
            print("   over every trainer iteration:" + line.split(":", 1)[1] if "windows:" in line else line)


if __name__ == "__main__":
    main()
