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


def test_the_suite_s_tekton_flags_and_the_assistant_names_tekton_gives() -> None:
    """What `configure` writes and `followed` waits for: the suite's default (assistant off),
    Tekton's shipped flags (on, `workspaces`) whatever the default, and the assistant named per
    claim in `workspaces`, per run (the same in both per-run modes) otherwise."""
    from e2e.harness.cluster import tekton

    if not tekton.module_dir().exists():
        pytest.skip("Tekton's module is not in the Go module cache (e2e/build.sh tekton)")
    assert tekton.suite_mode(None) == ("workspaces" if tekton.AS_SHIPPED else "disabled")
    assert tekton.suite_mode({"coschedule": "pipelineruns"}) == "pipelineruns"
    assert tekton.suite_mode(tekton.SHIPPED) == tekton.shipped_mode() == "workspaces"
    [flags] = [c for c in tekton.config_maps(tekton.SHIPPED)
               if c["metadata"]["name"] == tekton.FEATURE_FLAGS]
    assert flags["data"]["coschedule"] == "workspaces"
    assert tekton.assistant_name("disabled", "run") is None
    per_claim = tekton.assistant_name("workspaces", "run", "ws")
    per_run = tekton.assistant_name("pipelineruns", "run", "ws")
    assert per_run == tekton.assistant_name("isolate-pipelinerun", "run", "other")
    assert len({per_claim, per_run}) == 2
    assert all(str(n).startswith("affinity-assistant-") and len(str(n)) == 29
               for n in (per_claim, per_run))


def test_the_matrix_has_one_cell_on_tekton_s_defaults() -> None:
    from e2e.tools import matrix

    for kind in ("full", "reduced"):
        [cell] = [c for c in matrix.plan(kind) if c.tekton_defaults]
        assert cell.name.endswith("-tekton-defaults")
        assert cell.env()["E2E_TEKTON_DEFAULTS"] == "1"
        assert not any(c.env().get("E2E_TEKTON_DEFAULTS") for c in matrix.plan(kind)
                       if not c.tekton_defaults)
