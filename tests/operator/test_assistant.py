"""Tekton's own affinity assistant, on in any mode, is no problem beside tekton-coscheduler: its
mode is a metric and a log line when it changes, never a Warning (nor any other write)."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from controller.kube.clusterview import Facts
from controller.metrics import Metrics
from controller.operator.executor import Assistant
from controller.settings import Settings


class Events:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str, str, bool]] = []

    def post_event(self, involved: Any, reason: str, message: str, warning: bool = True) -> None:
        meta = involved["metadata"]
        self.posted.append((involved["kind"], meta["name"], reason, message, warning))


def enabled(metrics: Metrics) -> float | None:
    return metrics.registry.get_sample_value("tekton_coscheduler_tekton_affinity_assistant_enabled")


def modes(metrics: Metrics) -> dict[str, float]:
    return {s.labels["mode"]: s.value for family in metrics.registry.collect()
            if family.name == "tekton_coscheduler_tekton_affinity_assistant_mode"
            for s in family.samples}


def watch(settings: Settings) -> tuple[Assistant, Metrics]:
    """The assistant as operator/runs.py makes it: it holds no executor and no queue, so the
    assistant being on is never a write (no Warning, no Event)."""
    metrics = Metrics()
    return Assistant(settings, metrics), metrics


def flags(coschedule: str | None) -> Facts:
    data = None if coschedule is None else {"coschedule": coschedule}
    return Facts(synced=True, assistant_on=coschedule != "disabled", feature_flags=data)


OFF, ON = flags("disabled"), flags("workspaces")


@pytest.mark.parametrize("mode", ["workspaces", "pipelineruns", "isolate-pipelinerun"])
def test_the_assistant_on_in_any_mode_is_its_mode_as_the_metric(
    settings: Settings, mode: str
) -> None:
    assistant, metrics = watch(settings)
    assistant.on_facts(Facts(), OFF)
    assert enabled(metrics) == 0 and modes(metrics)["disabled"] == 1
    assistant.on_facts(OFF, flags(mode))
    assert enabled(metrics) == 1
    assert modes(metrics) == {"disabled": 0, "workspaces": 0, "pipelineruns": 0,
                              "isolate-pipelinerun": 0, "unknown": 0, mode: 1}
    assistant.on_facts(flags(mode), OFF)
    assert enabled(metrics) == 0 and modes(metrics)["disabled"] == 1 and modes(metrics)[mode] == 0


def test_missing_flags_are_tekton_s_default_and_a_value_it_does_not_know_is_unknown(
    settings: Settings
) -> None:
    assistant, metrics = watch(settings)
    assistant.on_facts(OFF, flags(None))
    assert modes(metrics)["workspaces"] == 1
    assistant.on_facts(flags(None), flags("sometimes"))
    assert modes(metrics)["unknown"] == 1 and modes(metrics)["workspaces"] == 0


def test_no_mode_is_told_before_every_watch_has_listed(settings: Settings) -> None:
    """Until Tekton's flags are read the view assumes the assistant on: the mode is not told
    from that guess."""
    assistant, metrics = watch(settings)
    with capture_logs() as logs:
        assistant.on_facts(Facts(), Facts(assistant_on=True))
    assert modes(metrics) == {} and logs == []
    assistant.on_facts(Facts(assistant_on=True), OFF)
    assert modes(metrics)["disabled"] == 1


def test_a_change_of_mode_is_one_info_line_saying_what_it_means(settings: Settings) -> None:
    assistant, _ = watch(settings)
    with capture_logs() as logs:
        assistant.on_facts(Facts(), OFF)
        assistant.on_facts(OFF, OFF)  # other facts changed: nothing new to say
        assistant.on_facts(OFF, flags("pipelineruns"))
    assert [(e["log_level"], e["mode"]) for e in logs] == [("info", "disabled"),
                                                           ("info", "pipelineruns")]
    line = logs[1]
    assert line["event"] == "Tekton's affinity assistant mode"
    assert line["previous"] == "disabled"
    assert line["state"].startswith("on, mode pipelineruns (alpha)")
    assert line["opted_in"].startswith("tekton-coscheduler anchors each run")
    assert "untouched by tekton-coscheduler" in line["others"]
