"""The chart's alerts and dashboard query metrics the operator exports, and the metrics page
lists every one: none can drift from the registry."""

from __future__ import annotations

import pytest

from controller.metrics import Metrics
from tests import metrics_doc, promql


def test_promql_names_are_found_and_nothing_else() -> None:
    expr = ('histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket{job=~"$job",le!="1e3"}'
            '[$__rate_interval]))) / on (pod) group_left b_total offset 5m > bool 1e3 '
            "or absent(c{x='y'}) unless d[5m:1m] > {{ $r.waitingSeconds }}")
    assert promql.metric_names(expr) == {"a_seconds_bucket", "b_total", "c", "d"}


def test_a_misspelt_name_is_reported() -> None:
    registry = Metrics().registry
    exprs = {"good": "sum(rate(tekton_coscheduler_reservations_total[5m]))",
             "histogram": "tekton_coscheduler_run_to_anchor_seconds_count",
             "external": "up == 0",
             "misspelt": "max(tekton_coscheduler_leaders)",
             "no suffix": "rate(tekton_coscheduler_reservations[5m])"}
    assert promql.unknown(exprs, registry) == {"misspelt": {"tekton_coscheduler_leaders"},
                                               "no suffix": {"tekton_coscheduler_reservations"}}


def test_every_metric_the_dashboard_and_the_alerts_read_is_exported() -> None:
    exprs = promql.dashboard_exprs(promql.read_dashboard())
    rules = promql.rule_exprs(promql.RULES.read_text())
    assert {"TektonCoschedulerNoLeader", "TektonCoschedulerWebhookUnavailable"} <= set(rules)
    assert len(exprs) > 20
    exprs.update({f"alert {name}": expr for name, expr in rules.items()})
    assert promql.unknown(exprs, Metrics().registry) == {}


def test_an_alert_written_as_a_block_is_refused_rather_than_skipped() -> None:
    with pytest.raises(ValueError, match="TektonCoschedulerX"):
        promql.rule_exprs("        - alert: TektonCoschedulerX\n          expr: >-\n            up\n")


def test_every_alert_links_its_runbook_section() -> None:
    template = promql.RULES.read_text()
    runbooks = (promql.CHART.parent.parent / "docs" / "operations" / "runbooks.md").read_text()
    headings = {line[3:].strip().lower() for line in runbooks.splitlines()
                if line.startswith("## ")}
    for alert in promql.rule_exprs(template):
        assert f"runbook_url: {{{{ $runbook }}}}#{alert.lower()}" in template, alert
        assert alert.lower() in headings, f"docs/operations/runbooks.md has no ## {alert}"


def test_the_alerts_page_lists_every_alert_the_chart_renders() -> None:
    page = (promql.CHART.parent.parent / "docs" / "operations" / "alerts.md").read_text()
    listed = {line.split("|")[1].strip().strip("`") for line in page.splitlines()
              if line.startswith("| `TektonCoscheduler")}
    assert listed == set(promql.rule_exprs(promql.RULES.read_text()))


def test_the_metrics_page_lists_every_metric_as_the_registry_does() -> None:
    assert metrics_doc.current() == metrics_doc.table(), (
        "docs/operations/metrics.md is stale: run python -m tests.metrics_doc")


def test_no_alert_reads_tekton_s_assistant_which_is_on_by_default() -> None:
    """Tekton's assistant on is Tekton's default and no problem beside tekton-coscheduler
    (docs/user-guide/compatibility.md#beside-tektons-assistant): an alert on it would fire on
    every cluster left as Tekton installs it."""
    rules = promql.rule_exprs(promql.RULES.read_text())
    assert {name for name, expr in rules.items()
            if "assistant" in (name + expr).lower()} == set()
