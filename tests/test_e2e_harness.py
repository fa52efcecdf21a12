"""The e2e harness's own promises that its scenarios lean on without checking them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from e2e.harness import capacity
from e2e.harness import tekton_runs as tr
from tests import factories


class OneRunStore:
    """The part of CustomObjectsApi create_run uses: a create that fails with `error` (after
    storing the run, as a resent POST's first send did) and a get."""

    def __init__(self, error: ApiException | None) -> None:
        self.error = error
        self.runs: dict[str, dict[str, Any]] = {}

    def create_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        body = {**args[-1], "status": {"made": "first send"}}
        self.runs[body["metadata"]["name"]] = body
        if self.error:
            raise self.error
        return body

    def get_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        return self.runs[args[-1]]


def test_a_run_whose_create_was_resent_is_the_run_made_by_the_first_send() -> None:
    store = OneRunStore(factories.api_error(409, 'pipelineruns "tk-1" already exists'))
    run = tr.create_run(store, "ns", {"metadata": {"name": "tk-1"}})  # type: ignore[arg-type]
    assert run == {"metadata": {"name": "tk-1"}, "status": {"made": "first send"}}


@pytest.mark.parametrize("status", [400, 403, 422, 500])
def test_a_create_refused_otherwise_is_an_error(status: int) -> None:
    store = OneRunStore(factories.api_error(status))
    with pytest.raises(ApiException) as raised:
        tr.create_run(store, "ns", {"metadata": {"name": "tk-1"}})  # type: ignore[arg-type]
    assert raised.value.status == status


def test_a_failed_spread_shows_each_pod_made_bound_and_deleted_from_the_first() -> None:
    """What a capacity scenario prints when its layer was bound too far apart: whether a pod
    was made late (Tekton) or waited for room (bound late), beside the reservation pods."""
    pods = [
        tr.PodSeen("run-build-b-pod", {}, first_seen=104.0, node="big", bound_at=110.25),
        tr.PodSeen("run-room-0", {}, first_seen=100.0, node="big", bound_at=100.5,
                   deleted=True, deleted_at=104.1),
        tr.PodSeen("run-build-a-pod", {}, first_seen=103.9),
    ]
    assert capacity.timeline(pods).splitlines() == [
        "run-room-0: made +0.00, bound +0.50 on big, deleted +4.10",
        "run-build-a-pod: made +3.90, bound - on -, deleted -",
        "run-build-b-pod: made +4.00, bound +10.25 on big, deleted -",
    ]
    assert capacity.timeline([]) == "no pods seen"
