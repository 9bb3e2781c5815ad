#!/usr/bin/python3
"""Which switches this kernel's sched_switch tracepoint does not report, the cause of probe
counter windows flagged "uncounted_thread" (seqpoint_probe_flagged_windows_total): a thread that
runs after a switch the tracepoint missed is on its CPU with no switch-in seen, and every window
with a probe inside that run is left out (probes/README.md, "Unreported switches").

Records sched:sched_switch on every CPU with perf for a while, then follows each CPU's sequence
of switches: a switch whose prev is not the CPU's last next is a break (the switch in between was
not reported), and the thread reported switching in just before it is the one whose switch-out
went missing. Prints the breaks and the threads that caused them. Needs root and perf.

    sudo probes/tool/sched_switch_gaps.py [--seconds 20]
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

LINE = re.compile(r"\[(\d+)\]\s+([\d.]+):.*?prev_comm=(.*?) prev_pid=(\d+) .*?"
                  r"==> next_comm=(.*?) next_pid=(\d+)")


def gaps(lines):
    """(switches, breaks, {(comm, tid) switched in before a break: count},
    {(comm, tid) that ran after a break: count}) over `lines` of perf script."""
    last_next = {}  # cpu -> (comm, tid)
    switches = breaks = 0
    culprits, victims = collections.Counter(), collections.Counter()
    for line in lines:
        m = LINE.search(line)
        if not m:
            continue
        cpu, prev, nxt = int(m[1]), (m[3], int(m[4])), (m[5], int(m[6]))
        switches += 1
        before = last_next.get(cpu)
        if before is not None and before[1] != prev[1]:
            breaks += 1
            culprits[before] += 1
            victims[prev] += 1
        last_next[cpu] = nxt
    return switches, breaks, culprits, victims


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("sched_switch_gaps: needs root (perf records every CPU)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "sw.data")
        rec = subprocess.run(["perf", "record", "-q", "-e", "sched:sched_switch", "-a", "-o", data,
                              "--", "sleep", str(a.seconds)], capture_output=True, text=True)
        if rec.returncode != 0:
            print("sched_switch_gaps: perf record failed: " + rec.stderr.strip(), file=sys.stderr)
            return 1
        out = subprocess.run(["perf", "script", "-i", data, "-F", "cpu,time,trace"],
                             capture_output=True, text=True, check=True).stdout
    switches, breaks, culprits, victims = gaps(out.splitlines())
    print("%d switches in %.0f s, %d not reported (a CPU's next switch came from another thread)"
          % (switches, a.seconds, breaks))
    for (comm, tid), n in culprits.most_common(10):
        print("  switched in, switch-out not reported: %s (tid %d) x%d" % (comm, tid, n))
    for (comm, tid), n in victims.most_common(10):
        print("  ran next with no switch-in reported:  %s (tid %d) x%d" % (comm, tid, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
