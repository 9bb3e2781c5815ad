#!/usr/bin/env python3
"""Renders packaging/grafana/seqpoint-fleet-dashboard.json without Grafana: every panel's query
runs against a live Prometheus (range queries for time series, instant queries for bar gauges
and tables, the dashboard's variables set to match all), and the answers are drawn into one
static HTML page laid out by the panels' gridPos (SVG lines, bars, table rows), with each
panel's title, query, legend and series count. With --screenshot, headless Chromium (Debian's
`chromium`) loads the page and writes a PNG.

This is not Grafana's rendering (its panel plugins, units and styling are not reproduced): what
it shows is that each panel's PromQL is valid, returns the series it should from agents' real
/metrics, and that those series tell the story the panel promises. Exit status 1 when a panel
listed in --expect-data returned no series (or a query failed), 2 on usage errors. Run by
bench/fleet/run.sh on its live fleet, and by render_fleet_dashboard_test.py (ctest
grafana_fleet_dashboard_render: replaying agents, a real Prometheus, the screenshot checked).

Usage: render_fleet_dashboard.py --prometheus URL --out DIR [--minutes 10] [--screenshot]
           [--expect-data "Title,Title"]"""
import argparse
import html
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DASHBOARD = os.path.join(HERE, "seqpoint-fleet-dashboard.json")
COLORS = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6",
          "#9a6324", "#800000", "#469990", "#000075", "#808000"]


def query(base, path, params):
    url = base + path + "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(body.get("error", "query failed"))
    return body["data"]["result"]


def legend(fmt, metric):
    if not fmt:
        return "{" + ",".join("%s=%s" % kv for kv in sorted(metric.items())) + "}"
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt)


def svg_lines(series, start, end, width=560, height=190):
    values = [float(v) for s in series for _, v in s["values"] if v not in ("NaN", "+Inf", "-Inf")]
    if not values:
        return "<p class=empty>no data</p>"
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad
    x = lambda t: 40 + (t - start) / max(end - start, 1) * (width - 50)
    y = lambda v: 10 + (hi - v) / (hi - lo) * (height - 30)
    out = ['<svg width="%d" height="%d">' % (width, height)]
    for frac in (0, 0.5, 1):
        v = lo + (hi - lo) * frac
        out.append('<line x1=40 x2=%d y1=%.1f y2=%.1f stroke="#ddd"/><text x=2 y=%.1f>%.3g</text>'
                   % (width - 10, y(v), y(v), y(v) + 4, v))
    for i, s in enumerate(series):
        pts = " ".join("%.1f,%.1f" % (x(float(t)), y(float(v))) for t, v in s["values"]
                       if v not in ("NaN", "+Inf", "-Inf"))
        out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>'
                   % (COLORS[i % len(COLORS)], pts))
    out.append('<text x=40 y=%d>-%.0f min</text><text x=%d y=%d>now</text></svg>'
               % (height - 4, (end - start) / 60, width - 40, height - 4))
    return "".join(out)


def bars(series, fmt):
    if not series:
        return "<p class=empty>no data</p>"
    rows = sorted(((legend(fmt, s["metric"]), float(s["value"][1])) for s in series),
                  key=lambda r: -r[1])
    top = max(abs(v) for _, v in rows) or 1
    return "<table>" + "".join(
        '<tr><td>%s</td><td><div class=bar style="width:%dpx"></div></td><td>%.3g</td></tr>'
        % (html.escape(n), int(220 * abs(v) / top), v) for n, v in rows) + "</table>"


def table(series):
    if not series:
        return "<p class=empty>no rows (no alert firing or pending)</p>"
    keys = sorted({k for s in series for k in s["metric"] if k != "__name__"})
    head = "".join("<th>%s</th>" % html.escape(k) for k in keys)
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(s["metric"].get(k, ""))
                                           for k in keys) for s in series)
    return "<table class=grid><tr>%s</tr>%s</table>" % (head, body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--screenshot", action="store_true")
    ap.add_argument("--expect-data", default="")
    args = ap.parse_args()
    try:
        dash = json.load(open(DASHBOARD))
    except (OSError, ValueError) as e:
        print("render_fleet_dashboard: %s: %s" % (DASHBOARD, e))
        return 2
    os.makedirs(args.out, exist_ok=True)
    end = time.time()
    start = end - args.minutes * 60
    step = max(1, int(args.minutes * 60 / 200))
    cells, summary, failures = [], [], []
    for p in dash["panels"]:
        g = p["gridPos"]
        style = "grid-column:%d / span %d;grid-row:%d / span %d" % (
            g["x"] + 1, g["w"], g["y"] + 1, g["h"])
        if p["type"] == "row":
            cells.append('<div class=row style="%s">%s</div>' % (style, html.escape(p["title"])))
            continue
        parts, count = [], 0
        for t in p.get("targets", []):
            q = t["expr"].replace("$fleet_job", ".*")
            try:
                if p["type"] == "timeseries":
                    res = query(args.prometheus, "/api/v1/query_range",
                                {"query": q, "start": start, "end": end, "step": step})
                    body = svg_lines(res, start, end) + "".join(
                        '<span class=key style="color:%s">&#9632; %s</span>'
                        % (COLORS[i % len(COLORS)], html.escape(legend(t.get("legendFormat"), s["metric"])))
                        for i, s in enumerate(res))
                else:
                    res = query(args.prometheus, "/api/v1/query", {"query": q, "time": end})
                    body = bars(res, t.get("legendFormat")) if p["type"] == "bargauge" else table(res)
            except Exception as e:  # a bad query is the finding: shown, and the exit status says it
                res, body = [], "<p class=empty>query failed: %s</p>" % html.escape(str(e))
                failures.append("%s: %s: %s" % (p["title"], q, e))
            count += len(res)
            parts.append('<code>%s</code>%s' % (html.escape(q), body))
        summary.append((p["title"], count))
        cells.append('<div class=panel style="%s"><h3>%s <small>%d series</small></h3>%s</div>'
                     % (style, html.escape(p["title"]), count, "".join(parts)))
    page = """<!doctype html><meta charset=utf-8><title>%s</title><style>
body{font:12px sans-serif;margin:8px;background:#f4f5f5}
.dash{display:grid;grid-template-columns:repeat(24,1fr);grid-auto-rows:30px;gap:4px}
.panel{background:#fff;border:1px solid #ccc;padding:4px;overflow:hidden}
.row{font-weight:bold;font-size:14px;padding-top:8px}
h3{margin:0 0 2px 0;font-size:13px} small{color:#888;font-weight:normal}
code{display:block;color:#555;font-size:10px;white-space:pre-wrap;margin-bottom:2px}
.key{margin-right:8px;font-size:10px} .empty{color:#a00} text{font-size:10px;fill:#666}
.bar{background:#4363d8;height:10px} table.grid td,table.grid th{border:1px solid #ddd;padding:1px 4px}
</style><h2>%s <small>(static rendering of the dashboard's queries; Prometheus %s, last %g min)</small></h2>
<div class=dash>%s</div>""" % (html.escape(dash["title"]), html.escape(dash["title"]),
                              html.escape(args.prometheus), args.minutes, "".join(cells))
    page_path = os.path.join(args.out, "dashboard.html")
    with open(page_path, "w") as f:
        f.write(page)
    for title, n in summary:
        print("%4d series  %s" % (n, title))
    for title in filter(None, args.expect_data.split(",")):
        if dict(summary).get(title, 0) == 0:
            failures.append("panel %r returned no series" % title)
    if args.screenshot:
        png = os.path.join(args.out, "dashboard.png")
        # The whole grid: 30 px rows and 4 px gaps under a heading of about 60 px.
        height = 80 + 34 * max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dash["panels"])
        rc = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                             "--hide-scrollbars", "--window-size=1600,%d" % height,
                             "--screenshot=" + png, "file://" + page_path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        if rc.returncode != 0 or not os.path.exists(png):
            failures.append("chromium wrote no screenshot (exit %d)" % rc.returncode)
        else:
            print("screenshot: %s" % png)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
