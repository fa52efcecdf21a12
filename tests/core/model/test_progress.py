"""A run's progress as its pods show it."""

from __future__ import annotations

from controller.core.model import progress
from controller.core.model.pods import RunPod


def pod(task: str, phase: str, node: str = "n1") -> RunPod:
    return RunPod(f"{task}-pod", node, phase, task)


def test_a_run_is_between_layers_once_a_pod_ended_and_none_runs_or_waits() -> None:
    assert progress.between_layers([pod("fetch", "Succeeded")])
    assert progress.between_layers([pod("fetch", "Succeeded"), pod("lint", "Failed")])


def test_a_run_is_not_between_layers_while_a_pod_runs_or_waits_or_before_any_ended() -> None:
    assert not progress.between_layers([])
    assert not progress.between_layers([pod("fetch", "Running")])
    assert not progress.between_layers([pod("fetch", "Succeeded"), pod("build", "Running")])
    assert not progress.between_layers([pod("fetch", "Succeeded"), pod("build", "Pending", "")])
    assert not progress.between_layers([pod("fetch", "Succeeded"), pod("build", "Pending")])


def made(*names: str) -> list[dict[str, str]]:
    """A run's status.childReferences, as Tekton writes them."""
    return [{"kind": "TaskRun", "name": n, "pipelineTaskName": n} for n in names]


def shown(task: str, phase: str = "Running") -> RunPod:
    return RunPod(f"{task}-pod", "n1", phase, task, task_run=task)


def test_taskruns_made_after_the_last_one_whose_pod_is_shown_have_pods_to_come() -> None:
    assert progress.pods_to_come(made("fetch"), [])
    assert progress.pods_to_come(made("fetch", "a", "b", "c"),
                                 [shown("fetch", "Succeeded"), shown("a"), shown("b")])


def test_no_pods_are_to_come_when_every_taskrun_shows_one_or_an_earlier_one_lost_its_own() -> None:
    assert not progress.pods_to_come(made("fetch", "a"), [shown("fetch", "Succeeded"), shown("a")])
    assert not progress.pods_to_come(made("fetch", "a"), [shown("a")])  # fetch's pod deleted
    assert not progress.pods_to_come(None, [shown("a")])
    assert not progress.pods_to_come(
        [{"kind": "CustomRun", "name": "approve"}, "junk", {"kind": "TaskRun"}], [])
