#!/usr/bin/env python3
"""bench/gpu/prove.sh's check of the GPU window rule as the daemon applied it.

  prove_windows.py STATUS_JSON METRICS_TXT [--expect-none]

STATUS_JSON is `seqpoint status --json`; METRICS_TXT the daemon's /metrics page. The daemon
keeps a measured window's GPU values only when a CUDA sync closed it (collectors/gpu/
sync_window.h: a sync in the window's tail, runs.gpu_sync_tail_ms, or the next one within
runs.gpu_sync_bound_ms), else it leaves them out and counts why. Prints one summary of
seqpoint_gpu_windows_total{outcome} beside status's gpu_windows, and checks:
  - status and /metrics agree on every outcome (the left-out ones included: not_closed,
    no_sync_probe, cut_short, no_iteration are each counted, 0 or more, never missing);
  - closed_at_sync > 0: the zero-code GRU's iterations end before its loss.item(), so its
    windows can only be closed by the next sync; none means the rule never closed one.
With --expect-none (a daemon that measured nothing, as on a machine without a GPU) the second
check is that every outcome is 0 instead. Exit 0 when the checks pass, 1 when one fails.
"""
import json
import re
import sys

OUTCOMES = ["closed_at_end", "closed_at_sync", "not_closed", "no_sync_probe", "cut_short",
            "no_iteration"]


def metric_outcomes(text):
    """seqpoint_gpu_windows_total{outcome="..."} values of a Prometheus text page."""
    got = {}
    pattern = re.compile(r'^seqpoint_gpu_windows_total\{([^}]*)\}\s+(\S+)')
    for line in text.splitlines():
        m = pattern.match(line)
        if not m:
            continue
        label = re.search(r'outcome="([^"]*)"', m.group(1))
        if label:
            got[label.group(1)] = float(m.group(2))
    return got


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    expect_none = "--expect-none" in sys.argv[1:]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    status = json.load(open(args[0]))
    metrics = metric_outcomes(open(args[1]).read())
    windows = status.get("gpu_windows")
    print("== GPU windows (the daemon's rule: values kept only when a CUDA sync closed the window)")
    if not isinstance(windows, dict):
        print("   status has no gpu_windows: this seqpointd does not report the rule")
        print("   GPU windows: FAIL")
        return 1
    agree = True
    for k in OUTCOMES:
        s = windows.get(k)
        m = metrics.get(k)
        same = s is not None and m is not None and float(s) == m
        agree &= same
        print("   %-15s status %6s   /metrics %6s   %s" %
              (k, "-" if s is None else s, "-" if m is None else "%g" % m,
               "" if same else "MISMATCH or MISSING"))
    n = {k: int(windows.get(k) or 0) for k in OUTCOMES}
    kept = n["closed_at_end"] + n["closed_at_sync"]
    left = n["not_closed"] + n["no_sync_probe"] + n["cut_short"] + n["no_iteration"]
    print("   kept %d (%d at the end, %d at the next sync, lag max %.1f ms); left out %d" %
          (kept, n["closed_at_end"], n["closed_at_sync"], float(windows.get("lag_ms_max") or 0),
           left))
    if left:
        print("   last reason left out: %s" % (windows.get("last_flag") or "(none given)"))
    print("   every outcome counted, status = /metrics: %s" % ("PASS" if agree else "FAIL"))
    if expect_none:
        second = kept + left == 0
        print("   no window decided (nothing measured on a GPU): %s" % ("PASS" if second else "FAIL"))
    else:
        second = n["closed_at_sync"] > 0
        print("   closed_at_sync > 0 (the GRU's windows closed by its next sync): %s" %
              ("PASS" if second else "FAIL"))
    ok = agree and second
    print("   GPU windows: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
