"""What the API client sends is counted, and every write says whose leadership it acts under."""

from __future__ import annotations

from typing import Any

import kubernetes
from structlog.testing import capture_logs

from controller.kube.client import Kube
from controller.metrics import Metrics

BASE = "https://127.0.0.1:6443"


class Response:
    status = 201
    data = b"{}"


def client_sending(sent: list[tuple[str, str]]) -> kubernetes.client.ApiClient:
    api = kubernetes.client.ApiClient()

    def call_api(method: str, url: str, *args: Any, **kwargs: Any) -> Response:
        sent.append((method, url))
        return Response()

    api.call_api = call_api  # type: ignore[method-assign]
    return api


def test_a_write_is_logged_with_the_lease_holder_as_it_is_sent() -> None:
    sent: list[tuple[str, str]] = []
    kube = Kube(client_sending(sent), metrics=Metrics())
    kube.actor = "replica-a_1234"
    with capture_logs() as logs:
        kube.api.call_api("POST", f"{BASE}/apis/apps/v1/namespaces/ns/statefulsets")
        kube.api.call_api("DELETE", f"{BASE}/api/v1/namespaces/ns/pods/p")
    assert [(e["event"], e["verb"], e["resource"], e["holder"]) for e in logs] == [
        ("api write", "create", "statefulsets", "replica-a_1234"),
        ("api write", "delete", "pods", "replica-a_1234"),
    ]
    assert len(sent) == 2


def test_reads_and_the_lease_renewals_are_not_logged_but_all_are_counted() -> None:
    metrics = Metrics()
    kube = Kube(client_sending([]), metrics=metrics)
    with capture_logs() as logs:
        kube.api.call_api("GET", f"{BASE}/apis/apps/v1/namespaces/ns/statefulsets/b")
        kube.api.call_api("PUT", f"{BASE}/apis/coordination.k8s.io/v1/namespaces/ns/leases/l")
    assert logs == []
    counted = {
        (s.labels["verb"], s.labels["resource"]): s.value
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name == "tekton_coscheduler_api_requests_total"
    }
    assert counted == {("get", "statefulsets"): 1.0, ("update", "leases"): 1.0}


def test_a_write_before_leading_says_it_has_no_holder() -> None:
    kube = Kube(client_sending([]))
    with capture_logs() as logs:
        kube.api.call_api("PATCH", f"{BASE}/api/v1/namespaces/ns/events/e")
    assert [(e["event"], e["holder"]) for e in logs] == [("api write", None)]
