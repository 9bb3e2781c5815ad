#!/usr/bin/env python3
"""The fleet dashboard rendered as an operator would: three real seqpointd agents (node names n1,
n2, n3; each replays the recorded trainer trace tests/data/agent/gru_debian_1500.csv as one
fleet job, paced so that their counters grow while scraped), one real Prometheus scraping them
every second with packaging/prometheus/seqpoint-fleet-rules.yml loaded, then
render_fleet_dashboard.py --screenshot (Debian's headless chromium). Checked: the script exits 0
with the node panels holding series (one per node, or per node and SL bin), every panel is on the page (the
straggler panels say "no data": a replay has no ranks), and the screenshot is not blank: the
line colours of the three nodes and the bars' colour are drawn in it.

Skips (exit 77) with the reason when prometheus or chromium is not installed.
Usage: render_fleet_dashboard_test.py SEQPOINTD SOURCE_DIR"""
import html
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import render_fleet_dashboard as render  # noqa: E402  (its colours and its dashboard)

NODE_PANELS = ("Index per node over time", "Worst nodes now",
               "A job's nodes side by side: cost per unit of work", "Index per node and SL bin")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def instant(prom, q):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (prom, urllib.parse.urlencode({"query": q}))
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)["data"]["result"]
    except (OSError, ValueError):
        return []  # Prometheus still starting


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB/RGBA non-interlaced PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, "unexpected PNG format"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    seqpointd, source = sys.argv[1], sys.argv[2]
    for tool, why in (("prometheus", "apt install prometheus"), ("chromium", "apt install chromium")):
        if shutil.which(tool) is None:
            print("SKIP: %s is not installed (%s): the dashboard cannot be rendered" % (tool, why))
            return 77
    trace = os.path.join(source, "tests/data/agent/gru_debian_1500.csv")
    work = tempfile.mkdtemp(prefix="seqpoint-dashboard-")
    procs, targets, keep = [], [], False
    try:
        for i in (1, 2, 3):
            port = free_port()
            d = os.path.join(work, "n%d" % i)
            os.makedirs(d)
            # 1500 rows in steps of 64 every 1.5 s: the counters grow for about 35 s.
            procs.append(subprocess.Popen(
                [seqpointd, "--state-dir", d + "/state", "--runtime-dir", d + "/run",
                 "--metrics-listen", "127.0.0.1:%d" % port, "--replay", trace + "@fleet-render",
                 "--replay-delay-us", "1500000", "--replay-no-exit"],
                env=dict(os.environ, SEQPOINT_NODE_NAME="n%d" % i),
                stdout=subprocess.DEVNULL, stderr=open(d + "/seqpointd.log", "w")))
            targets.append("'127.0.0.1:%d'" % port)
        prom = free_port()
        with open(os.path.join(work, "prometheus.yml"), "w") as f:
            f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                    "rule_files: ['%s/packaging/prometheus/seqpoint-fleet-rules.yml']\n"
                    "scrape_configs:\n  - job_name: seqpoint\n"
                    "    static_configs: [{targets: [%s]}]\n" % (source, ",".join(targets)))
        procs.append(subprocess.Popen(
            ["prometheus", "--config.file", work + "/prometheus.yml", "--storage.tsdb.path",
             work + "/tsdb", "--web.listen-address", "127.0.0.1:%d" % prom],
            stdout=subprocess.DEVNULL, stderr=open(work + "/prometheus.log", "w")))
        # Every node's index evaluated, then 10 s more of history for the time series.
        deadline, since = time.time() + 150, None
        while time.time() < deadline:
            n = len(instant(prom, "seqpoint_fleet:node_index:ratio"))
            since = since or (time.time() if n == 3 else None)
            if since and time.time() - since >= 10:
                break
            time.sleep(1)
        else:
            print("FAIL: the three nodes' index never appeared in Prometheus (logs in %s)" % work)
            keep = True
            return 1
        out = os.path.join(work, "out")
        r = subprocess.run([sys.executable, os.path.join(HERE, "render_fleet_dashboard.py"),
                            "--prometheus", "http://127.0.0.1:%d" % prom, "--out", out,
                            "--minutes", "1", "--screenshot", "--expect-data", ",".join(NODE_PANELS)],
                           capture_output=True, text=True, timeout=240)
        print(r.stdout, end="")
        failures = [] if r.returncode == 0 else ["render_fleet_dashboard.py exited %d" % r.returncode]
        counts = {line[11:].strip(): int(line[:4]) for line in r.stdout.splitlines()
                  if line[4:11] == " series"}
        # One series per node in the index panels; per node and main bin in the others (a run's
        # main bins can still change while its replay is young: at least one per node).
        for title, exact in zip(NODE_PANELS, (True, True, False, False)):
            n = counts.get(title, 0)
            if n != 3 if exact else n < 3:
                failures.append("panel %r: %d series, want %s3" % (title, n, "" if exact else ">= "))
        page = open(os.path.join(out, "dashboard.html")).read()
        dash = json.load(open(render.DASHBOARD))
        for p in dash["panels"]:
            if p["type"] != "row" and ">%s <small>" % html.escape(p["title"]) not in page:
                failures.append("panel %r is not on the page" % p["title"])
        w, h, rows = png_pixels(os.path.join(out, "dashboard.png"))
        seen = {}
        for row in rows:
            for px in row:
                seen[px] = seen.get(px, 0) + 1
        background = max(seen.values()) / (w * h)
        print("screenshot %dx%d: %d colours, the most common on %.0f%% of it" %
              (w, h, len(seen), 100 * background))
        wanted = {"node line %d" % i: render.COLORS[i] for i in range(3)}
        wanted["bar"] = "#4363d8"
        for what, hexcolour in wanted.items():
            rgb = tuple(int(hexcolour[k:k + 2], 16) for k in (1, 3, 5))
            if seen.get(rgb, 0) < 20:
                failures.append("screenshot: the %s colour %s is drawn on %d pixels" %
                                (what, hexcolour, seen.get(rgb, 0)))
        if background > 0.95:
            failures.append("screenshot: %.0f%% one colour: blank" % (100 * background))
        for f in failures:
            print("FAIL:", f)
        if failures:
            print("(kept for a look: %s)" % work)
            keep = True
            return 1
        return 0
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
