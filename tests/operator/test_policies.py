"""A policy's Ready says it is in effect: written only once the operator's own view holds that
generation of it (kopf's event of a policy may come before the view's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller.kube.clusterview import Facts
from controller.metrics import Metrics
from controller.operator.executor import Executor
from controller.operator.policies import Policies
from controller.settings import Settings


@dataclass
class Kube:
    policies: list[dict[str, Any]] = field(default_factory=list)
    written: list[dict[str, Any]] = field(default_factory=list)

    def list_policies(self, namespace: str) -> list[dict[str, Any]]:
        return self.policies

    def patch_policy_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.written.append(status)


@dataclass
class View:
    facts: Facts

    def subscribe(self, listener: Any) -> None:
        pass


def policy(generation: int) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "team-a", "uid": "u1",
                         "generation": generation, "creationTimestamp": "2026-11-26T10:00:00Z"},
            "spec": {"isolation": "required"}}


def test_ready_is_written_only_once_the_view_holds_that_generation() -> None:
    kube, view = Kube(), View(Facts())
    policies = Policies(Settings(), kube, Executor(kube, None), Metrics(), view)  # type: ignore[arg-type]
    kube.policies = [policy(2)]
    policies.report(policy(2))  # kopf's event, before the view has it
    assert kube.written == []
    view.facts = Facts(policy_objects=(policy(1),))  # the view still on the older generation
    policies.report(policy(2))
    assert kube.written == []
    view.facts = Facts(policy_objects=(policy(2),))
    policies.report(policy(2))
    [status] = kube.written
    assert status["observedGeneration"] == 2
    assert [c["status"] for c in status["conditions"] if c["type"] == "Ready"] == ["True"]


def test_a_look_at_a_policy_keeps_its_status_from_the_view_s_newest_copy() -> None:
    kube, view = Kube(), View(Facts(policy_objects=(policy(3),)))
    policies = Policies(Settings(), kube, Executor(kube, None), Metrics(), view)  # type: ignore[arg-type]
    kube.policies = [policy(3)]
    policies.look("team-a", "other")  # not in the view (deleted, or not seen yet): nothing
    assert kube.written == []
    policies.look("team-a", "p")  # whatever generation an earlier event or round read
    [status] = kube.written
    assert status["observedGeneration"] == 3
