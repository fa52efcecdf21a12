"""What the API client sends is counted, and every write says whose leadership it acts under."""

from __future__ import annotations

from typing import Any

import kubernetes
from structlog.testing import capture_logs

from controller.kube.client import Kube
from controller.kube.fencing import Leadership
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

    api.call_api = call_api  # type: ignore[method-assign, assignment]  # a fake response
    return api


def test_a_write_is_logged_with_the_lease_holder_as_it_is_sent() -> None:
    sent: list[tuple[str, str]] = []
    leadership = Leadership()
    kube = Kube(client_sending(sent), metrics=Metrics(), leadership=leadership)
    leadership.grant("replica-a_1234", float("inf"))
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


def test_the_gate_comes_off_by_a_strategic_merge_patch_that_spares_a_successor_pod() -> None:
    """The patch names the pod's uid: a pod of the same name made since (a retried TaskRun) is
    not touched, and neither it nor a pod gone counts as released."""
    calls: list[dict[str, Any]] = []
    answer: list[int] = [200]

    class Sent(Response):
        class response:  # the raw answer, which a write reads to its end
            @staticmethod
            def read() -> bytes:
                return b"{}"

            @staticmethod
            def release_conn() -> None:
                pass

    api = kubernetes.client.ApiClient()

    def call_api(method: str, url: str, header_params: Any = None, body: Any = None,
                 *args: Any, **kwargs: Any) -> Sent:
        calls.append({"method": method, "url": url, "headers": header_params, "body": body})
        if answer[0] != 200:
            raise kubernetes.client.exceptions.ApiException(status=answer[0])
        return Sent()

    api.call_api = call_api  # type: ignore[method-assign, assignment]  # a fake response
    kube = Kube(api, metrics=Metrics())
    patch = {"spec": {"schedulingGates": [{"name": "g", "$patch": "delete"}]}}
    assert kube.release_pod_gate("ns", "p", "uid-1", patch) is True
    [sent] = calls
    assert sent["method"] == "PATCH" and sent["url"].endswith("/api/v1/namespaces/ns/pods/p")
    assert sent["headers"]["Content-Type"] == "application/strategic-merge-patch+json"
    assert sent["body"] == {**patch, "metadata": {"uid": "uid-1"}}
    for status in (404, 409):
        answer[0] = status
        assert kube.release_pod_gate("ns", "p", "uid-1", patch) is False


def test_a_write_made_without_the_lease_by_design_says_so() -> None:
    """The gates handed back once leading ends go unfenced (kube/fencing.py): their log line
    says it, or the chaos scenario took one for a write that escaped the fence (a cold CI run:
    `unheld_writes=1`, a gate patch right after `leadership lost`)."""
    leadership = Leadership()
    kube = Kube(client_sending([]), metrics=Metrics(), leadership=leadership)
    with capture_logs() as logs:
        with leadership.unfenced():
            kube.api.call_api("PATCH", f"{BASE}/api/v1/namespaces/ns/pods/p")
        leadership.grant("replica-a_1234", float("inf"))
        kube.api.call_api("PATCH", f"{BASE}/api/v1/namespaces/ns/events/e")
    assert [(e["holder"], e.get("unfenced")) for e in logs] == [(None, True),
                                                                ("replica-a_1234", None)]
