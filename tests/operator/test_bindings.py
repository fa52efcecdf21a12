"""Policy mode's bindings kept as the view says: which changes of the view ask the API server."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controller.kube.clusterview import Facts
from controller.metrics import Metrics
from controller.operator.executor import Executor
from controller.operator.policies import PolicyBindings
from controller.settings import Settings


class Policies:
    """The admission API as the bindings use it, counting each call."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.bindings: dict[str, dict[str, Any]] = {}

    def get_policy(self, name: str) -> dict[str, Any]:
        self.calls.append("get")
        return {"apiVersion": "admissionregistration.k8s.io/v1beta1",
                "metadata": {"name": name, "uid": f"uid-{name}"}}

    def list_bindings(self, selector: str) -> list[dict[str, Any]]:
        self.calls.append("list")
        return list(self.bindings.values())

    def create_binding(self, body: dict[str, Any]) -> None:
        self.calls.append("create")
        self.bindings[body["metadata"]["name"]] = {
            **body, "metadata": {**body["metadata"], "resourceVersion": "1"}}

    def replace_binding(self, body: dict[str, Any], version: str) -> None:
        self.calls.append("replace")
        self.bindings[body["metadata"]["name"]] = body

    def delete_binding(self, name: str) -> None:
        self.calls.append("delete")
        self.bindings.pop(name, None)


def test_a_policy_s_status_changes_no_binding_and_costs_no_call() -> None:
    api = Policies()
    bindings = PolicyBindings(Settings(), api, Metrics(), "tcs", executor=Executor(None, None, api))  # type: ignore[arg-type]
    bindings.active = True
    before = Facts(synced=False)
    now = Facts(synced=True, enabled_namespaces=frozenset({"team-a"}), assistant_on=False)
    bindings.on_facts(before, now)
    assert "create" in api.calls  # the first synced view: the bindings made
    api.calls.clear()
    warmed = replace(now, warm_status={"team-a": {"warm": "node-a"}},
                     policy_objects=({"metadata": {"name": "p"}},))
    bindings.on_facts(now, warmed)
    assert api.calls == []
    switched = replace(warmed, enabled_namespaces=frozenset({"team-a", "team-b"}))
    bindings.on_facts(warmed, switched)
    assert api.calls[:3] == ["get", "get", "list"]
