#!/usr/bin/env python3
"""Checks packaging/grafana/seqpoint-fleet-dashboard.json against the fleet rules: every series a
query or variable names is a recording rule of packaging/prometheus/seqpoint-fleet-rules.yml (or
Prometheus's ALERTS), and every alert it lists is an alert of that file; every panel has a
query; every alert of that file is listed by some panel (none raised unseen); the panels the fleet
view promises are there (REQUIRED_PANELS), "Straggling by cause" split by the cause label; every
family of seqpointd that a query, a variable or a fleet rule names is in docs/metrics.md, with
the labels it is matched on, and is uploaded by remote-write (the fleet rules work on
remote-written data too). With --prometheus URL, also runs each query (its variables set to match all) against a
live Prometheus and prints how many series it returned (bench/fleet/run.sh does).
Exit status: 0 ok, 1 a check failed (each failure printed), 2 usage or unreadable file."""
import importlib.util
import json
import os
import re
import sys
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DASHBOARD = os.path.join(HERE, "seqpoint-fleet-dashboard.json")
RULES = os.path.join(HERE, "..", "prometheus", "seqpoint-fleet-rules.yml")
# The PromQL name finder, YAML-subset reader and docs/metrics.md parser of the node rules' check.
_spec = importlib.util.spec_from_file_location(
    "check_rules_files", os.path.join(HERE, "..", "prometheus", "check-rules-files.py"))
rules_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rules_check)
# Issue 23's fleet view: index per node over time, the worst nodes now, a job's nodes side by
# side, straggling by cause.
REQUIRED_PANELS = ("Index per node over time", "Worst nodes now",
                   "A job's nodes side by side: cost per unit of work", "Straggling by cause",
                   "Ranks last at equal SL",
                   "A job's ranks side by side: compute per token against peers at equal SL",
                   "Slow-rank verdicts", "Detection floor: no slow rank means none slower than")


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
    # Every family of seqpointd named by a query or a fleet rule: documented, with its labels.
    fams = rules_check.documented_families(rules_check.METRICS_DOC)
    rule_exprs = [("%s: %s" % (os.path.basename(RULES), r.get("record") or r.get("alert")),
                   r.get("expr") or "")
                  for _, r in rules_check.rules_of(rules_check.load_yaml(RULES))]
    dash_exprs = [("dashboard: %r" % e, e.replace("$fleet_job", ".*"))
                  for e in exprs if not e.startswith("label_values")]
    errors = []
    rules_check.check_names(rule_exprs + dash_exprs, fams, recorded | {"ALERTS"}, errors,
                            uploaded_only={w for w, _ in rule_exprs})
    failures += [e.replace("so it does not belong in group " + rules_check.UPLOADED_GROUP,
                           "and the fleet rules must hold on remote-written data") for e in errors]
    titles = {p["title"]: p for p in dash["panels"]}
    for t in REQUIRED_PANELS:
        if t not in titles:
            failures.append("no panel %r" % t)
    by_cause = titles.get("Straggling by cause")
    if by_cause and not any("cause" in t.get("legendFormat", "") for t in by_cause["targets"]):
        failures.append("panel 'Straggling by cause' does not show the cause label")
    listed = set()
    for e in exprs:
        listed |= set(re.findall(r"Seqpoint[A-Za-z]+", e))
    for a in sorted(alerts - listed):
        failures.append("alert %s of %s is shown by no panel" % (a, RULES))
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
