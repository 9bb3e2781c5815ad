#!/usr/bin/env python3
"""Static checks of the Prometheus rules and the Grafana dashboard shipped in packaging/.

  check-rules-files.py rules      every recording rule has a promql_expr_test in
                                  seqpoint-rules.test.yml; every alert has a test case where it
                                  fires and one where it does not; every family and label the
                                  rules name is in docs/metrics.md, and the seqpoint-runs group
                                  uses only the families the agent uploads by remote-write
                                  (ctest prometheus_rules_coverage)
  check-rules-files.py dashboard  every query of packaging/grafana/seqpoint-dashboard.json, its
                                  Grafana-variable matchers ({key=~"$key"}) taken off, is a
                                  recording rule of seqpoint-rules.yml or an expression that
                                  seqpoint-rules.test.yml evaluates; every family its queries and
                                  variables name is in docs/metrics.md (ctest
                                  grafana_dashboard_queries)

promtool itself (check rules, test rules) is run by the ctests prometheus_rules_check and
prometheus_rules_test. Python 3 standard library only: the two YAML files are read by the small
YAML-subset reader below (block mappings and sequences, plain and quoted scalars, literal and
folded block scalars, empty flow collections), which refuses anything else.
Exit status: 0 ok, 1 a check failed (each failure printed), 2 usage or unreadable file.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(HERE, "seqpoint-rules.yml")
TESTS = os.path.join(HERE, "seqpoint-rules.test.yml")
DASHBOARD = os.path.join(HERE, "..", "grafana", "seqpoint-dashboard.json")
METRICS_DOC = os.path.join(HERE, "..", "..", "docs", "metrics.md")

# Labels Prometheus adds to every scraped series; not in docs/metrics.md.
TARGET_LABELS = {"job", "instance"}
# Series that do not come from seqpointd but the rules may use.
PROMETHEUS_SERIES = {"up"}
# The rule group that must work on remote-written data alone.
UPLOADED_GROUP = "seqpoint-runs"


class YamlError(Exception):
    pass


# --- a YAML subset --------------------------------------------------------------------------------
def _strip_comment(text):
    """Removes a trailing ` # comment` outside quotes."""
    quote, i = None, 0
    while i < len(text):
        c = text[i]
        i += 1
        if quote:
            if c == "\\" and quote == '"':
                i += 1  # the escaped character
            elif c == quote:
                quote = None
        elif c in "\"'" and (i == 1 or text[i - 2] in " :-[{,"):
            quote = c
        elif c == "#" and (i == 1 or text[i - 2] in " \t"):
            return text[: i - 1].rstrip()
    return text.rstrip()


def _scalar(text, where):
    text = text.strip()
    if text == "[]":
        return []
    if text == "{}":
        return {}
    if text.startswith("[") or text.startswith("{"):
        if text.startswith("[") and text.endswith("]"):
            return [_scalar(x, where) for x in text[1:-1].split(",") if x.strip()]
        raise YamlError(f"{where}: flow mappings are not supported: {text}")
    if text.startswith('"'):
        if len(text) < 2 or not text.endswith('"'):
            raise YamlError(f"{where}: unterminated double-quoted string")
        try:
            return json.loads(text)
        except ValueError as e:
            raise YamlError(f"{where}: bad double-quoted string ({e})") from None
    if text.startswith("'"):
        if len(text) < 2 or not text.endswith("'"):
            raise YamlError(f"{where}: unterminated single-quoted string")
        return text[1:-1].replace("''", "'")
    if text in ("", "~", "null"):
        return None
    return text


_KEY = re.compile(r"""^("(?:[^"\\]|\\.)*"|'[^']*'|[^\s"'#\-\[\]{}][^:#]*?)\s*:(?:\s+(.*))?$""")


class _Reader:
    def __init__(self, text, name):
        self.name = name
        self.lines = []  # (line number, indent, text without comment)
        self.raw = text.split("\n")
        for n, line in enumerate(self.raw, 1):
            if "\t" in line[: len(line) - len(line.lstrip())]:
                raise YamlError(f"{name}:{n}: tab in indentation")
            body = _strip_comment(line)
            if body.strip():
                self.lines.append((n, len(body) - len(body.lstrip()), body.strip()))
        self.i = 0

    def where(self, n):
        return f"{self.name}:{n}"

    def parse(self):
        if not self.lines:
            return None
        value = self.block(self.lines[0][1])
        if self.i != len(self.lines):
            n = self.lines[self.i][0]
            raise YamlError(f"{self.where(n)}: unexpected indentation")
        return value

    def block(self, indent):
        n, ind, text = self.lines[self.i]
        if ind != indent:
            raise YamlError(f"{self.where(n)}: unexpected indentation")
        if text == "-" or text.startswith("- "):
            return self.sequence(indent)
        return self.mapping(indent)

    def sequence(self, indent):
        out = []
        while self.i < len(self.lines):
            n, ind, text = self.lines[self.i]
            dash = text == "-" or text.startswith("- ")
            if ind < indent or (ind == indent and not dash):
                break  # the parent mapping's next key
            if ind > indent:
                raise YamlError(f"{self.where(n)}: expected a sequence item")
            rest = text[1:].lstrip()
            if not rest:
                self.i += 1
                out.append(self.nested(indent, n))
                continue
            item_indent = ind + (len(text) - len(rest))
            if rest == "-" or rest.startswith("- "):
                raise YamlError(f"{self.where(n)}: nested sequences on one line are not supported")
            if _KEY.match(rest):
                # "- key: value": a mapping whose first line shares the dash's line.
                self.lines[self.i] = (n, item_indent, rest)
                out.append(self.mapping(item_indent))
            else:
                self.i += 1
                out.append(self.value(rest, item_indent, n))
        return out

    def nested(self, indent, n, same_indent_sequence=False):
        """The block under a `key:` or `-` with nothing after it (None when there is none)."""
        if self.i < len(self.lines):
            _, ind, text = self.lines[self.i]
            if ind > indent:
                return self.block(ind)
            if same_indent_sequence and ind == indent and (text == "-" or text.startswith("- ")):
                return self.sequence(indent)
        return None

    def mapping(self, indent):
        out = {}
        while self.i < len(self.lines):
            n, ind, text = self.lines[self.i]
            if ind < indent:
                break
            if ind > indent:
                raise YamlError(f"{self.where(n)}: unexpected indentation")
            if text == "-" or text.startswith("- "):
                break
            m = _KEY.match(text)
            if not m:
                raise YamlError(f"{self.where(n)}: expected `key: value`, got {text!r}")
            key = _scalar(m.group(1), self.where(n))
            if key in out:
                raise YamlError(f"{self.where(n)}: duplicate key {key!r}")
            self.i += 1
            rest = m.group(2)
            if rest is None or not rest.strip():
                out[key] = self.nested(indent, n, same_indent_sequence=True)
            else:
                out[key] = self.value(rest, indent, n)
        return out

    def value(self, text, indent, n):
        if re.fullmatch(r"[|>][+-]?", text):
            return self.block_scalar(text, indent, n)
        if text.startswith("&") or text.startswith("*") or text.startswith("!"):
            raise YamlError(f"{self.where(n)}: anchors, aliases and tags are not supported")
        return _scalar(text, self.where(n))

    def block_scalar(self, style, indent, n):
        # Read the raw lines (comments are content here) after line n, more indented than indent.
        lines, k = [], n  # self.raw index k is line k + 1
        while k < len(self.raw):
            line = self.raw[k]
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            lines.append(line)
            k += 1
        while lines and not lines[-1].strip():
            lines.pop()
        content = [l for l in lines if l.strip()]
        if not content:
            raise YamlError(f"{self.where(n)}: empty block scalar")
        cut = min(len(l) - len(l.lstrip()) for l in content)
        body = [l[cut:] if l.strip() else "" for l in lines]
        text = "\n".join(body) if style[0] == "|" else re.sub(r"(?<!\n)\n(?!\n)", " ", "\n".join(body))
        if not style.endswith("-"):
            text += "\n"
        while self.i < len(self.lines) and self.lines[self.i][0] <= k:
            self.i += 1
        return text


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return _Reader(f.read(), os.path.relpath(path)).parse()


# --- PromQL, just enough to find names --------------------------------------------------------------
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
             "unless", "offset", "inf", "nan", "atan2"}
_MATCHER = re.compile(r'([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def normalize(expr):
    return re.sub(r"\s+", " ", expr).strip()


def selectors(expr):
    """(name or None, [(label, op, value)]) of every vector selector in expr."""
    out = []
    for m in re.finditer(r'([A-Za-z_:][\w:]*)?\s*\{([^}]*)\}', expr):
        name = m.group(1)
        if name and name.lower() in _KEYWORDS:
            name = None
        out.append((name, _MATCHER.findall(m.group(2))))
    return out


def names(expr):
    """Metric names in expr: selectors' names, names in {__name__=~"a|b"}, bare names."""
    found = set()
    for name, matchers in selectors(expr):
        if name:
            found.add(name)
        for label, op, value in matchers:
            if label == "__name__":
                found.update(v for v in value.split("|") if v)
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}", "", bare)
    bare = re.sub(r"\[[^\]]*\]", "", bare)
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)
    for m in re.finditer(r"(?<![\w:.])([A-Za-z_:][\w:]*)(\s*\()?", bare):
        if m.group(2) or m.group(1).lower() in _KEYWORDS:
            continue
        found.add(m.group(1))
    return found


def strip_variable_matchers(expr):
    """Takes every matcher whose value holds a Grafana variable ($x, ${x}) off expr."""
    def fix(m):
        kept = [x for x in _MATCHER.finditer(m.group(1)) if "$" not in x.group(3)]
        inner = ", ".join(x.group(0) for x in kept)
        return "{" + inner + "}" if inner else ""
    return re.sub(r"\{([^}]*)\}", fix, expr)


# --- the files ----------------------------------------------------------------------------------------
def documented_families(path):
    fams = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^\| `(seqpoint_\w+)` \| (\w+) \| ([^|]*) \| ([^|]*) \|", line)
            if m:
                labels = set(re.findall(r"`(\w+)`", m.group(3)))
                fams[m.group(1)] = {"labels": labels, "uploaded": m.group(4).strip() == "yes"}
    if not fams:
        raise YamlError(f"{path}: no metric table found")
    return fams


def rules_of(rules_doc):
    out = []
    for g in rules_doc.get("groups") or []:
        for r in g.get("rules") or []:
            out.append((g.get("name"), r))
    return out


def check_names(exprs, fams, recorded, errors, uploaded_only=()):
    for where, expr in exprs:
        for name in sorted(names(expr)):
            if name in recorded or name in PROMETHEUS_SERIES:
                continue
            if name not in fams:
                errors.append(f"{where}: {name} is not a family of docs/metrics.md")
            elif where in uploaded_only and not fams[name]["uploaded"]:
                errors.append(f"{where}: {name} is not uploaded by remote-write (docs/metrics.md),"
                              f" so it does not belong in group {UPLOADED_GROUP}")
        for name, matchers in selectors(expr):
            if name not in fams:
                continue
            allowed = fams[name]["labels"] | TARGET_LABELS
            for label, _, _ in matchers:
                if label not in allowed:
                    errors.append(f"{where}: {name} has no label {label!r} (docs/metrics.md: "
                                  f"{', '.join(sorted(fams[name]['labels'])) or 'none'})")


def check_rules(errors):
    rules_doc, tests_doc, fams = load_yaml(RULES), load_yaml(TESTS), documented_families(METRICS_DOC)
    rules = rules_of(rules_doc)
    recorded = {r["record"] for _, r in rules if "record" in r}
    alerts = [r["alert"] for _, r in rules if "alert" in r]
    exprs, uploaded_only = [], set()
    for group, r in rules:
        where = f"{os.path.basename(RULES)}: {r.get('record') or r.get('alert')}"
        exprs.append((where, r.get("expr") or ""))
        if group == UPLOADED_GROUP:
            uploaded_only.add(where)
        if "alert" in r:
            labels, ann = r.get("labels") or {}, r.get("annotations") or {}
            if labels.get("severity") not in ("critical", "warning", "info"):
                errors.append(f"{where}: severity must be critical, warning or info")
            for a in ("summary", "description"):
                if not (ann.get(a) or "").strip():
                    errors.append(f"{where}: no {a} annotation")
    check_names(exprs, fams, recorded, errors, uploaded_only)

    files = tests_doc.get("rule_files") or []
    if [os.path.basename(f) for f in files] != [os.path.basename(RULES)]:
        errors.append(f"{os.path.basename(TESTS)}: rule_files must be [{os.path.basename(RULES)}]")
    tested_exprs, firing, quiet = [], set(), set()
    for t in tests_doc.get("tests") or []:
        for e in t.get("promql_expr_test") or []:
            tested_exprs.append(e.get("expr") or "")
        for a in t.get("alert_rule_test") or []:
            (firing if a.get("exp_alerts") else quiet).add(a.get("alertname"))
    for name in sorted(recorded):
        if not any(name in names(e) for e in tested_exprs):
            errors.append(f"recording rule {name}: no promql_expr_test evaluates it")
    for name in alerts:
        if name not in firing:
            errors.append(f"alert {name}: no alert_rule_test where it fires")
        if name not in quiet:
            errors.append(f"alert {name}: no alert_rule_test where it does not fire")
    for name in sorted((firing | quiet) - set(alerts)):
        errors.append(f"alert_rule_test names {name}, which is no alert of the rules")
    print(f"rules: {len(recorded)} recording rules, {len(alerts)} alerts, "
          f"{len(tested_exprs)} expression tests")


def panels_of(dash):
    for p in dash.get("panels") or []:
        yield p
        for q in p.get("panels") or []:  # collapsed rows keep their panels inside
            yield q


def check_dashboard(errors):
    rules_doc, tests_doc, fams = load_yaml(RULES), load_yaml(TESTS), documented_families(METRICS_DOC)
    with open(DASHBOARD, encoding="utf-8") as f:
        dash = json.load(f)
    recorded = {r["record"] for _, r in rules_of(rules_doc) if "record" in r}
    tested = {normalize(e.get("expr") or "") for t in tests_doc.get("tests") or []
              for e in t.get("promql_expr_test") or []}
    if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 37:
        errors.append("dashboard: schemaVersion must be 37 or later")
    variables = {v.get("name"): v for v in (dash.get("templating") or {}).get("list") or []}
    if (variables.get("datasource") or {}).get("type") != "datasource":
        errors.append("dashboard: no datasource variable named datasource")
    exprs, count = [], 0
    for p in panels_of(dash):
        ds = p.get("datasource") or {}
        for t in p.get("targets") or []:
            expr = t.get("expr")
            if expr is None:
                continue
            count += 1
            where = f"dashboard panel {p.get('title')!r} target {t.get('refId')}"
            exprs.append((where, expr))
            for d in (ds, t.get("datasource") or {}):
                if d and d.get("uid") != "${datasource}":
                    errors.append(f"{where}: datasource must be ${{datasource}}, not {d.get('uid')}")
            core = normalize(strip_variable_matchers(expr))
            if core not in recorded and core not in tested:
                errors.append(f"{where}: {core} is neither a recording rule nor an expression "
                              f"tested in {os.path.basename(TESTS)}")
    for name, v in variables.items():
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if v.get("type") == "query" and q:
            m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q, re.S)
            if not m:
                errors.append(f"dashboard variable {name}: expected label_values(SELECTOR, LABEL)")
                continue
            exprs.append((f"dashboard variable {name}", m.group(1)))
    if count == 0:
        errors.append("dashboard: no panel queries")
    check_names(exprs, fams, recorded, errors)
    print(f"dashboard: {count} panel queries checked")


def main(argv):
    checks = {"rules": check_rules, "dashboard": check_dashboard}
    if len(argv) != 2 or argv[1] not in checks:
        sys.stderr.write(__doc__)
        return 2
    errors = []
    try:
        checks[argv[1]](errors)
    except (OSError, ValueError, YamlError, KeyError, AttributeError) as e:
        sys.stderr.write(f"{argv[1]}: cannot read the files: {e}\n")
        return 2
    for e in errors:
        print(f"FAIL: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
