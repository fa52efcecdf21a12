"""Requests classified as RBAC names them, for the operator's own request counter."""

from __future__ import annotations

import pytest

from controller.core.replica.apicalls import classify

HOST = "https://127.0.0.1:6443"


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/apis/apps/v1/namespaces/ns/statefulsets/coschedule-x", ("get", "statefulsets")),
        ("GET", "/apis/apps/v1/statefulsets?labelSelector=a%3Db", ("list", "statefulsets")),
        ("GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=5", ("watch", "pods")),
        ("GET", "/api/v1/namespaces?labelSelector=x", ("list", "namespaces")),
        ("GET", "/api/v1/namespaces/ns", ("get", "namespaces")),
        ("POST", "/apis/apps/v1/namespaces/ns/statefulsets", ("create", "statefulsets")),
        ("PATCH", "/apis/tekton-coscheduler.dev/v1alpha1/namespaces/ns/coschedulingpolicies/p/status",
         ("patch", "coschedulingpolicies/status")),
        ("POST", "/api/v1/namespaces/ns/pods/p/eviction", ("create", "pods/eviction")),
        ("DELETE", "/api/v1/namespaces/ns/pods/p", ("delete", "pods")),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", ("update", "leases")),
        ("GET", "/version", ("other", "")),
    ],
)
def test_requests_are_counted_by_verb_and_resource(method: str, path: str,
                                                   expected: tuple[str, str]) -> None:
    assert classify(method, HOST + path) == expected
