from __future__ import annotations

from typing import Any

import kubernetes_validate

from controller.core import balloon, budget
from controller.core.tekton import PipelineRun
from controller.settings import Settings
from tests import factories


def created_balloon(name: str = "build-42") -> dict[str, Any]:
    """The balloon as the API server returns it: the manifest with a uid."""
    run = PipelineRun.from_body(factories.pipelinerun(name=name))
    sts = balloon.plan(run, Settings().default_policy(), run.claims()).manifest
    sts["metadata"]["uid"] = "5e1f0c4a-0000-4000-8000-000000000001"
    return sts


def test_the_budget_covers_exactly_the_balloon_pod_and_refuses_every_eviction() -> None:
    sts = created_balloon()
    pdb = budget.of_balloon(sts)
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert selector and all(pod_labels[k] == v for k, v in selector.items())
    assert pdb["spec"]["minAvailable"] == 1  # one pod: no eviction is ever allowed
    assert (pdb["metadata"]["name"], pdb["metadata"]["namespace"]) == (
        sts["metadata"]["name"], sts["metadata"]["namespace"])
    kubernetes_validate.validate(pdb, "1.36", strict=True)


def test_the_budget_goes_with_its_balloon_and_never_blocks_its_deletion() -> None:
    sts = created_balloon(name="n" * 253)  # the longest run name: the budget's name is the balloon's
    (owner,) = budget.of_balloon(sts)["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": sts["metadata"]["name"],
        "uid": "5e1f0c4a-0000-4000-8000-000000000001",
        "controller": True,
        "blockOwnerDeletion": False,
    }
