"""No write leaves a replica whose Lease may have passed to another: refused before it is sent,
by this process's own clock, whatever its Lease loop has noticed yet."""

from __future__ import annotations

import pytest

from controller.kube.client import Kube
from controller.kube.errors import classify
from controller.kube.fencing import Leadership, NotLeading
from controller.metrics import Metrics
from tests.kube.test_client import BASE, client_sending


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_write_after_the_renew_deadline_is_refused_before_it_is_sent() -> None:
    clock = Clock()
    sent: list[tuple[str, str]] = []
    token = Leadership(clock=clock)
    kube = Kube(client_sending(sent), metrics=Metrics(), leadership=token)
    token.grant("replica-a_1", until=10.0)
    kube.api.call_api("POST", f"{BASE}/apis/apps/v1/namespaces/ns/statefulsets")
    clock.now = 10.5  # a pause past the deadline: the Lease loop has not run since
    with pytest.raises(NotLeading) as refused:
        kube.api.call_api("DELETE", f"{BASE}/api/v1/namespaces/ns/pods/p")
    assert classify(refused.value).reason == "not-leading" and not classify(refused.value).retry
    kube.api.call_api("GET", f"{BASE}/api/v1/namespaces/ns/pods/p")  # reads go on
    kube.api.call_api("PUT", f"{BASE}/apis/coordination.k8s.io/v1/namespaces/ns/leases/l")
    with token.unfenced():
        kube.api.call_api("PATCH", f"{BASE}/api/v1/namespaces/ns/pods/p")
    with pytest.raises(NotLeading):
        kube.api.call_api("PATCH", f"{BASE}/api/v1/namespaces/ns/pods/p")
    assert [m for m, _ in sent] == ["POST", "GET", "PUT", "PATCH"]


def test_without_leader_election_every_write_goes() -> None:
    sent: list[tuple[str, str]] = []
    kube = Kube(client_sending(sent), metrics=Metrics(), leadership=Leadership(enabled=False))
    kube.api.call_api("POST", f"{BASE}/api/v1/namespaces/ns/pods")
    assert len(sent) == 1
