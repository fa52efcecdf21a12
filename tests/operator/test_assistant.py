"""Tekton's own affinity assistant switched on and off: said once, where the administrator
looks, and taken back."""

from __future__ import annotations

from typing import Any

from controller.kube.clusterview import Facts
from controller.metrics import Metrics
from controller.operator.executor import Assistant, Executor, Notifier
from controller.settings import Settings


class Events:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str, str, bool]] = []

    def post_event(self, involved: Any, reason: str, message: str, warning: bool = True) -> None:
        meta = involved["metadata"]
        self.posted.append((involved["kind"], meta["name"], reason, message, warning))


def gauge(metrics: Metrics) -> float | None:
    return metrics.registry.get_sample_value("tekton_coscheduler_tekton_affinity_assistant_enabled")


def watch(settings: Settings) -> tuple[Assistant, Events, Metrics]:
    events, metrics = Events(), Metrics()
    return Assistant(settings, metrics, Executor(events, Notifier(events))), events, metrics  # type: ignore[arg-type]


OFF = Facts(synced=True, assistant_on=False, feature_flags={"coschedule": "disabled"})
ON = Facts(synced=True, assistant_on=True, feature_flags={"coschedule": "workspaces"})


def test_switched_on_it_is_said_once_as_a_warning_on_tekton_s_feature_flags(
    settings: Settings,
) -> None:
    assistant, events, metrics = watch(settings)
    assistant.on_facts(Facts(), OFF)
    assert events.posted == [] and gauge(metrics) == 0
    assistant.on_facts(OFF, ON)
    assistant.on_facts(ON, ON)  # a later change of other facts says nothing new
    ((kind, name, reason, message, warning),) = events.posted
    assert (kind, name, reason, warning) == (
        "ConfigMap", "feature-flags", "TektonAffinityAssistantOn", True)
    assert "coschedule='workspaces'" in message and "No balloons" not in message
    assert "opted in, tekton-coscheduler anchors the runs" in message
    assert gauge(metrics) == 1


def test_nothing_is_said_before_every_watch_has_listed(settings: Settings) -> None:
    assistant, events, _ = watch(settings)
    assistant.on_facts(Facts(), Facts(assistant_on=True))  # the default until Tekton's flags read
    assert events.posted == []
    assistant.on_facts(Facts(assistant_on=True), ON)  # synced: a standing problem is said
    assert [e[2] for e in events.posted] == ["TektonAffinityAssistantOn"]


def test_switched_off_and_on_again_it_is_said_again(settings: Settings) -> None:
    assistant, events, metrics = watch(settings)
    assistant.on_facts(OFF, ON)
    assistant.on_facts(ON, OFF)
    assert gauge(metrics) == 0
    assistant.on_facts(OFF, ON)
    assert [e[2] for e in events.posted] == ["TektonAffinityAssistantOn"] * 2


def test_it_names_missing_flags(settings: Settings) -> None:
    assistant, events, _ = watch(settings)
    assistant.on_facts(OFF, Facts(synced=True, assistant_on=True))
    ((_, _, _, message, _),) = events.posted
    assert "feature-flags missing" in message


def test_what_it_says_is_work_on_the_queue_not_a_write_of_the_view_s_watch_thread(
    settings: Settings,
) -> None:
    events, metrics = Events(), Metrics()
    queued: list[tuple[str, Any, Any]] = []
    assistant = Assistant(settings, metrics, Executor(events, Notifier(events)),  # type: ignore[arg-type]
                          lambda key, slot, act, seconds: queued.append((key, slot, act)))
    assistant.on_facts(OFF, ON)
    assert events.posted == [] and gauge(metrics) == 1  # the gauge at once, the Event queued
    [(key, _, act)] = queued
    act()  # the queue's worker
    assert key == "tekton/assistant"
    assert [e[2] for e in events.posted] == ["TektonAffinityAssistantOn"]
