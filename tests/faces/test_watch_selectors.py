"""Which pods the leader's pod watch asks the API server for."""

from __future__ import annotations

import kopf
import pytest

from controller.faces import kopf_handlers, reconciler
from controller.settings import Settings
from tests import factories


def resource(group: str, plural: str, kind: str) -> kopf.Resource:
    return kopf.Resource(group=group, version="v1", plural=plural, kind=kind,
                         singular=kind.lower(), namespaced=True, preferred=True)


PODS = resource("", "pods", "Pod")
PIPELINERUNS = resource("tekton.dev", "pipelineruns", "PipelineRun")


def matches(selector: str, labels: dict[str, str]) -> bool:
    """Enough of label selector semantics for `key in (a,b)`."""
    key, _, values = selector.partition(" in ")
    return labels.get(key) in values.strip("()").split(",")


def test_only_the_pod_watch_is_filtered_server_side() -> None:
    selector = kopf_handlers.pod_label_selector("tekton-pipelines")
    settings = reconciler.kopf_settings(Settings(), selector)
    assert list(settings.watching.label_selectors.collect(PODS)) == [selector]
    assert list(settings.watching.label_selectors.collect(PIPELINERUNS)) == []


@pytest.mark.parametrize("managed_by", ["tekton-pipelines", "ci-platform"])
def test_the_pod_selector_keeps_balloons_and_task_pods_and_drops_the_rest(managed_by: str) -> None:
    selector = kopf_handlers.pod_label_selector(managed_by)
    task_pod = factories.taskrun_pod()["metadata"]["labels"]
    task_pod["app.kubernetes.io/managed-by"] = managed_by
    assert matches(selector, task_pod)
    assert matches(selector, kopf_handlers.BALLOON_LABELS)
    assert not matches(selector, {"app": "web"})
    assert not matches(selector, {"app.kubernetes.io/managed-by": "Helm"})
