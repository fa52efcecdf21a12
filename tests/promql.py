"""The metric names a PromQL expression reads, and whether the operator exports them: what keeps
the chart's alerts and dashboard from querying a metric nothing serves (a misspelt or renamed one
returns no data, and an alert on it never fires)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

CHART = Path(__file__).resolve().parent.parent / "charts" / "tekton-coscheduler"
DASHBOARD = CHART / "dashboards" / "tekton-coscheduler.json"
RULES = CHART / "templates" / "prometheusrule.yaml"

# Read by the alerts or the dashboard but exported by others, each with who exports it.
EXTERNAL = {
    "up": "Prometheus, for every target it scrapes",
}

KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
            "group_left", "group_right", "inf", "nan"}
# Per type, the sample names a family is exposed and queried under.
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
            "summary": ("", "_sum", "_count"), "info": ("_info",),
            "gaugehistogram": ("_bucket", "_gsum", "_gcount")}


def metric_names(expr: str) -> set[str]:
    """Every metric name `expr` selects: identifiers that are not functions, keywords, label
    names (in matchers or grouping), strings, numbers or durations."""
    text = re.sub(r"\{\{.*?\}\}", "0", expr)  # a Helm template's value: a number here
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', text)
    text = re.sub(r"\{[^{}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"(?<![\w.$])[A-Za-z_:][A-Za-z0-9_:]*", text):
        if text[match.end():].lstrip().startswith("("):
            continue  # a function (sum, rate, histogram_quantile...)
        if match.group(0).lower() not in KEYWORDS:
            names.add(match.group(0))
    return names


def exported(registry: CollectorRegistry) -> set[str]:
    """The sample names a scrape of `registry` may show, labelled children or not yet."""
    names = set()
    for family in registry.collect():
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


def unknown(exprs: dict[str, str], registry: CollectorRegistry) -> dict[str, set[str]]:
    """Where each expression reads a name neither the registry nor EXTERNAL exports."""
    known = exported(registry) | set(EXTERNAL)
    found = {where: metric_names(expr) - known for where, expr in exprs.items()}
    return {where: names for where, names in found.items() if names}


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])  # a collapsed row holds its panels


def dashboard_exprs(dashboard: dict[str, Any]) -> dict[str, str]:
    """Each query of the dashboard, its panels' and its variables'."""
    out = {}
    for panel in _panels(dashboard["panels"]):
        for target in panel.get("targets") or []:
            out[f"panel {panel['title']!r} {target['refId']}"] = target["expr"]
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable["type"] == "query":
            query = variable["definition"]
            # label_values(SELECTOR, LABEL): the selector is PromQL, the label is not
            query = re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", query)
            out[f"variable {variable['name']!r}"] = query
    return out


def read_dashboard(path: Path = DASHBOARD) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def rule_exprs(template: str) -> dict[str, str]:
    """Each alert's expression in the PrometheusRule template, as written (Helm's {{ }} in
    it read as numbers). Expressions are one line each (`expr: ...`); a block scalar is
    refused, so that none is skipped."""
    out, alert = {}, "?"
    for line in template.splitlines():
        named = re.match(r"\s*- alert:\s*(\S+)", line)
        if named:
            alert = named.group(1)
        expr = re.match(r"\s*expr:\s*(.*)$", line)
        if expr:
            if expr.group(1).strip() in ("", "|", ">", "|-", ">-"):
                raise ValueError(f"{alert}: write its expr on one line")
            out[alert] = expr.group(1)
    return out
