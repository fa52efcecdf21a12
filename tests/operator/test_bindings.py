"""Policy mode's bindings kept as the view says: which changes of the view ask the API server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any

from controller.faces import streams
from controller.faces.serial import Serial
from controller.kube.client import ApiError
from controller.kube.clusterview import Facts
from controller.metrics import Metrics
from controller.operator import policies
from controller.operator.executor import Executor
from controller.operator.policies import PolicyBindings
from controller.settings import Settings

ERRORS = "tekton_coscheduler_admission_policy_binding_errors_total"


class Policies:
    """The admission API as the bindings use it, counting each call."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.bindings: dict[str, dict[str, Any]] = {}
        self.refusals = 0  # creates refused before one goes through

    def get_policy(self, name: str) -> dict[str, Any]:
        self.calls.append("get")
        return {"apiVersion": "admissionregistration.k8s.io/v1beta1",
                "metadata": {"name": name, "uid": f"uid-{name}"}}

    def list_bindings(self, selector: str) -> list[dict[str, Any]]:
        self.calls.append("list")
        return list(self.bindings.values())

    def create_binding(self, body: dict[str, Any]) -> None:
        self.calls.append("create")
        if self.refusals:
            self.refusals -= 1
            raise ApiError(status=500, reason="etcd leader changed")
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


TEAM_A = Facts(synced=True, enabled_namespaces=frozenset({"team-a"}), assistant_on=False)


def queued(api: Policies, view: list[Facts], soon: policies.Soon) -> tuple[PolicyBindings, Metrics]:
    metrics = Metrics()
    bindings = PolicyBindings(Settings(), api, metrics, "tcs", executor=Executor(None, None, api),  # type: ignore[arg-type]
                              soon=soon, facts=lambda: view[-1])
    bindings.active = True
    return bindings, metrics


def test_a_change_of_the_view_only_puts_the_key_and_its_worker_reads_the_view_then() -> None:
    api, view = Policies(), [TEAM_A]
    put: list[tuple[str, Hashable, Callable[[], None]]] = []
    bindings, _ = queued(api, view, lambda key, slot, act, seconds: put.append((key, slot, act)))
    bindings.on_facts(Facts(synced=False), TEAM_A)
    assert [(key, slot) for key, slot, _ in put] == [(policies.KEY, policies.KEY)]
    assert api.calls == []  # nothing asked in the view's thread
    view.append(replace(TEAM_A, enabled_namespaces=frozenset({"team-a", "team-b"})))
    put[0][2]()  # the worker, after a newer change: the view as it is now
    anchored = api.bindings["tekton-coscheduler-anchored"]
    selector = anchored["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert selector[0]["values"] == ["team-a", "team-b"]


def test_a_refusal_on_the_queue_is_counted_and_raised_for_its_backoff_in_place_said() -> None:
    api = Policies()
    api.refusals = 1
    put: list[Callable[[], None]] = []
    bindings, metrics = queued(api, [TEAM_A], lambda key, slot, act, seconds: put.append(act))
    bindings.sync(TEAM_A)
    try:
        put[0]()
        raised = False
    except ApiError:
        raised = True
    assert raised
    assert metrics.registry.get_sample_value(ERRORS) == 1
    in_place = PolicyBindings(Settings(), api, metrics, "tcs", executor=Executor(None, None, api))  # type: ignore[arg-type]
    in_place.active = True
    api.refusals = 1
    in_place.sync(TEAM_A)  # said, not raised: the next change or resync tries again
    assert metrics.registry.get_sample_value(ERRORS) == 2


def test_the_work_queue_keeps_the_bindings_one_worker_at_a_time_and_tries_a_refusal_again(
) -> None:
    """Two watch threads' changes at once: never two syncs at once (the lock that was), and a
    refused create made by the queue's retry, after its backoff."""
    api = Policies()
    api.refusals = 1
    inside, most = [0], [0]
    get_policy = api.get_policy

    def slow_get(name: str) -> dict[str, Any]:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.05)  # long enough for another worker to come in, were one let
        inside[0] -= 1
        return get_policy(name)

    api.get_policy = slow_get  # type: ignore[method-assign]
    work: Serial[streams.Work] = Serial(streams.handle, 4, "test", merge=streams.merge)

    def soon(key: str, slot: Hashable, act: Callable[[], None], seconds: float) -> None:
        work.put(key, streams.work(slot, lambda _kind, _obj: act(), "LOOK", {}, replaces=False))

    view = [TEAM_A]
    bindings, metrics = queued(api, view, soon)
    work.start()
    try:
        changes = [replace(TEAM_A, enabled_namespaces=frozenset({"team-a", f"team-{i}"}))
                   for i in range(6)]
        view.append(changes[-1])  # every worker reads the newest: the writes are the same
        for i, facts in enumerate(changes):
            threading.Thread(target=bindings.on_facts, args=(changes[i - 1], facts)).start()
        deadline = time.monotonic() + 10
        while not (work.settled([policies.KEY]) and "tekton-coscheduler-anchored" in api.bindings
                   ) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        work.stop()
    assert most[0] == 1
    assert metrics.registry.get_sample_value(ERRORS) == 1
    assert api.calls.count("create") == 3  # the refused one, then both made


def test_tekton_s_assistant_switched_on_keeps_the_bindings_and_costs_no_call() -> None:
    """Beside Tekton's assistant (issue 48): in an opted-in namespace the policy serves its
    placeholders and the pods it pins, in any of its modes; the bindings stand where they are."""
    api = Policies()
    bindings = PolicyBindings(Settings(), api, Metrics(), "tcs", executor=Executor(None, None, api))  # type: ignore[arg-type]
    bindings.active = True
    on = replace(TEAM_A, assistant_on=True, feature_flags={"coschedule": "workspaces"})
    bindings.on_facts(Facts(synced=False), on)
    assert set(api.bindings) == {"tekton-coscheduler-default", "tekton-coscheduler-anchored"}
    api.calls.clear()
    bindings.on_facts(on, TEAM_A)
    bindings.on_facts(TEAM_A, on)
    assert api.calls == []
