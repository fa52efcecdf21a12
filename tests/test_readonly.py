"""The read-only client (tests/readonly.py): reads go through, every write raises, and the
list of writes it refuses (tests/apisurface.py) covers every call of the operator's clients."""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

import pytest

from controller.core.placement.anchorplan import Ask
from controller.kube.admission_policies import AdmissionPolicies
from controller.kube.api import Api
from controller.kube.client import Kube
from controller.kube.inspection import Inspection
from tests import apisurface, factories
from tests.operator.test_anchors import Kube as AnchorKube
from tests.operator.test_anchors import guard, not_ready
from tests.operator.test_placement import task_pod
from tests.operator.test_runs import MemoryKube
from tests.readonly import ReadOnly, WriteRefused


def public_methods(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if inspect.isfunction(v) and not n.startswith("_")}


@pytest.mark.parametrize("cls", [Api, Kube, AdmissionPolicies])
def test_every_call_of_the_clients_is_known_to_write_or_to_read(cls: type) -> None:
    """A call added to a client must be put in one list: then the recorder records it (a
    write) or the read-only client lets it through (a read)."""
    unknown = public_methods(cls) - set(apisurface.WRITES) - apisurface.READS - apisurface.BY_METHOD
    assert unknown == set(), f"classify in tests/apisurface.py: {sorted(unknown)}"
    assert not set(apisurface.WRITES) & apisurface.READS


def test_reads_go_through() -> None:
    kube = MemoryKube()
    kube.runs["build-42"] = factories.pipelinerun()
    api: Any = ReadOnly(kube)
    assert api.get_pipelinerun("team-a", "build-42")["metadata"]["uid"] == factories.RUN_UID
    assert api.list_balloons() == []
    assert api.list_pvcs("team-a") == []


@pytest.mark.parametrize("method", sorted(apisurface.WRITES))
def test_every_write_raises_and_reaches_nothing(method: str) -> None:
    class Anything:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"{name} reached the wrapped client")

    with pytest.raises(WriteRefused, match=f"^{method}\\(.*writes"):
        getattr(ReadOnly(Anything()), method)("team-a", "x")


class Transport:
    """Api's requests by path, as Api.json and Api.send take them."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def json(self, method: str, url_path: str, body: Any = None, query: Any = None) -> Any:
        self.sent.append((method, url_path))
        return {"status": {"allowed": True}, "gitVersion": "v1.35.0"}

    def send(self, method: str, url_path: str, body: Any = None, content_type: str = "") -> None:
        self.sent.append((method, url_path))


def test_a_request_by_path_may_read_and_ask_for_a_review_but_not_write() -> None:
    transport = Transport()
    api: Any = ReadOnly(transport)
    inspection = Inspection(api)
    assert inspection.server_version() == "v1.35.0"
    assert inspection.can_i("", "pods", "create", "team-a")  # a POST that makes nothing
    with pytest.raises(WriteRefused, match="DELETE /api/v1/namespaces/team-a/pods/x"):
        api.send("DELETE", "/api/v1/namespaces/team-a/pods/x")
    with pytest.raises(WriteRefused, match="POST"):
        api.json("POST", "/api/v1/namespaces/team-a/pods", {})
    assert transport.sent == [
        ("GET", "/version"),
        ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"),
    ]


def test_a_call_not_known_to_read_raises_and_the_client_cannot_be_changed() -> None:
    api: Any = ReadOnly(MemoryKube())
    with pytest.raises(WriteRefused, match=r"evict_pod.*not known to be a read"):
        api.evict_pod("team-a", "x")
    with pytest.raises(WriteRefused):
        api.create_pdb = lambda manifest: True


def test_the_view_of_a_run_s_anchor_and_the_reads_its_plan_asks_for_only_read() -> None:
    """AnchorGuard.view and .read: what a look at a run's anchor reads before its plan."""
    kube: Any = ReadOnly(AnchorKube([task_pod("fetch", "n1")]))
    watched = guard(kube)
    watched.nodes.on_node(not_ready("n1"))
    view = watched.view(factories.RUN_UID)
    assert view.pod is not None and view.told
    listed = watched.read(replace(view, pod=replace(view.pod, claims=("ws",))), Ask.CLAIMS)
    assert listed.claims == {"ws": "unbound"}
    assert [p.name for p in watched.read(view, Ask.PODS).listed or ()] == ["build-42-fetch-pod"]
