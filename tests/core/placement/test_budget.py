from __future__ import annotations

from typing import Any

import kubernetes_validate

from controller.core.model.tekton import PipelineRun
from controller.core.placement import balloon, budget
from controller.settings import Settings
from tests import factories


def planned_balloon(name: str = "build-42") -> dict[str, Any]:
    run = PipelineRun.from_body(factories.pipelinerun(name=name))
    return balloon.plan(run, Settings().default_policy(), run.claims()).manifest


def test_the_namespace_s_budget_covers_every_balloon_pod_and_refuses_every_eviction() -> None:
    pdb = budget.of_namespace("team-a")
    selector = pdb["spec"]["selector"]["matchLabels"]
    for name in ("build-42", "n" * 253):  # the longest run name too
        pod_labels = planned_balloon(name)["spec"]["template"]["metadata"]["labels"]
        assert selector and all(pod_labels[k] == v for k, v in selector.items())
    assert pdb["spec"]["maxUnavailable"] == 0  # no eviction of any balloon is ever allowed
    assert (pdb["metadata"]["name"], pdb["metadata"]["namespace"]) == (budget.NAME, "team-a")
    kubernetes_validate.validate(pdb, "1.36", strict=True)


def test_the_budget_covers_no_pod_of_the_runs_nor_a_reservation() -> None:
    selector = budget.of_namespace("team-a")["spec"]["selector"]["matchLabels"]
    task_pod = factories.taskrun_pod()["metadata"]["labels"]
    reservation = {"app.kubernetes.io/managed-by": "tekton-coscheduler",
                   "app.kubernetes.io/component": "reservation"}
    for labels in (task_pod, reservation):
        assert not all(labels.get(k) == v for k, v in selector.items())


def test_a_budget_is_made_where_balloons_are_and_kept_while_the_namespace_is_enabled() -> None:
    plan = budget.plan(with_balloons=["a", "a", "b"], budgeted=["b", "c", "d"],
                       enabled=frozenset({"a", "c"}))
    assert plan.create == ("a",)
    assert plan.delete == ("d",)  # c is still enabled: its next run needs it


def test_a_switched_off_namespace_keeps_its_budget_while_a_balloon_is_left() -> None:
    plan = budget.plan(with_balloons=["off"], budgeted=["off"], enabled=frozenset())
    assert plan == budget.Plan(create=(), delete=())
