#!/usr/bin/env python3
"""Checks packaging/grafana/seqpoint-fleet-dashboard.json against the fleet rules: every series a
query or variable names is a recording rule of packaging/prometheus/seqpoint-fleet-rules.yml (or
Prometheus's ALERTS), and every alert it lists is an alert of that file; every panel has a
query. With --prometheus URL, also runs each query (its variables set to match all) against a
live Prometheus and prints how many series it returned (bench/fleet/run.sh does).
Exit status: 0 ok, 1 a check failed (each failure printed), 2 usage or unreadable file."""
import json
import os
import re
import sys
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DASHBOARD = os.path.join(HERE, "seqpoint-fleet-dashboard.json")
RULES = os.path.join(HERE, "..", "prometheus", "seqpoint-fleet-rules.yml")


def main():
    try:
        dash = json.load(open(DASHBOARD))
        rules = open(RULES).read()
    except (OSError, ValueError) as e:
        print("check_fleet_dashboard: %s" % e)
        return 2
    recorded = set(re.findall(r"^\s*- record: (\S+)", rules, re.M))
    alerts = set(re.findall(r"^\s*- alert: (\S+)", rules, re.M))
    exprs = [v["query"]["query"] for v in dash["templating"]["list"] if isinstance(v.get("query"), dict)]
    failures = []
    for p in dash["panels"]:
        if p["type"] == "row":
            continue
        if not p.get("targets"):
            failures.append("panel %r has no query" % p["title"])
        exprs += [t["expr"] for t in p.get("targets", [])]
    for e in exprs:
        for name in re.findall(r"\b(seqpoint[a-z_]*:[a-z_:]+)", e):
            if name not in recorded:
                failures.append("%r: %s is no recording rule of %s" % (e, name, RULES))
        for name in re.findall(r"Seqpoint[A-Za-z]+", e):
            if name not in alerts:
                failures.append("%r: %s is no alert of %s" % (e, name, RULES))
    for f in failures:
        print("FAIL", f)
    if len(sys.argv) == 3 and sys.argv[1] == "--prometheus":
        for e in exprs:
            if e.startswith("label_values"):
                continue
            q = e.replace("$fleet_job", ".*")
            url = sys.argv[2] + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
            with urllib.request.urlopen(url, timeout=5) as r:
                res = json.load(r)["data"]["result"]
            print("%3d series  %s" % (len(res), q))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
