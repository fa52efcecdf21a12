"""API Priority and Fairness for the operator's ServiceAccount: a priority level of its own,
with what a share of one gives and a queue of one (e2e/tests/test_apifaults.py), and what the
API server says it rejected."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from e2e.harness import chart
from e2e.harness.cluster import ClusterHandle

GROUP = "flowcontrol.apiserver.k8s.io"


def _service_account(name: str, namespace: str) -> dict[str, Any]:
    return {"kind": "ServiceAccount", "serviceAccount": {"name": name, "namespace": namespace}}


@contextlib.contextmanager
def flow_limited(cluster: ClusterHandle, level: str = "e2e-apifaults") -> Iterator[str]:
    """The operator's ServiceAccount in a priority level of its own: the fewest seats a share
    can get, no borrowing, and one queue so short that what does not fit is rejected with 429
    (and Retry-After). Its Lease requests keep the level Kubernetes gives leader election, as
    its own components' do: the fault is the run path's, not a lost Lease. Yields the level's
    name; everything is deleted afterwards."""
    account = _service_account(f"{chart.RELEASE}-tekton-coscheduler", chart.NAMESPACE)
    every = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True,
             "namespaces": ["*"]}
    objects = [
        ("prioritylevelconfigurations", {
            "apiVersion": f"{GROUP}/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": level},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Queue", "queuing": {
                    "queues": 1, "handSize": 1, "queueLengthLimit": 1}}}}}),
        ("flowschemas", _flow_schema(f"{level}-leases", "leader-election", 990, account, [
            {**every, "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}])),
        ("flowschemas", _flow_schema(level, level, 1000, account, [every])),
    ]
    with cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)
        for plural, body in objects:
            custom.create_cluster_custom_object(GROUP, "v1", plural, body)
        try:
            cluster.wait_for(lambda: seats(cluster, level), timeout=30,
                             what=f"priority level {level} in force")
            yield level
        finally:
            for plural, body in reversed(objects):
                with contextlib.suppress(ApiException):
                    custom.delete_cluster_custom_object(GROUP, "v1", plural,
                                                        body["metadata"]["name"])


def _flow_schema(name: str, level: str, precedence: int, subject: Mapping[str, Any],
                 rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "FlowSchema", "metadata": {"name": name},
            "spec": {"priorityLevelConfiguration": {"name": level},
                     "matchingPrecedence": precedence,
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [subject], "resourceRules": rules,
                                **({} if level != name else {"nonResourceRules": [
                                    {"verbs": ["*"], "nonResourceURLs": ["*"]}]})}]}}


def apiserver_metric(cluster: ClusterHandle, name: str, **labels: str) -> float:
    """The sum of the API server's samples `name` whose labels include `labels`."""
    with cluster.api_client() as api:
        text = api.call_api("GET", f"{api.configuration.host}/metrics").read().decode()
    return sum(s.value for family in text_string_to_metric_families(text)
               for s in family.samples
               if s.name == name and labels.items() <= s.labels.items())


def seats(cluster: ClusterHandle, level: str) -> float:
    """The priority level's nominal seats, as the API server has them (0: not in force yet)."""
    return apiserver_metric(cluster, "apiserver_flowcontrol_nominal_limit_seats",
                            priority_level=level)


def rejected(cluster: ClusterHandle, level: str) -> float:
    """Requests of the level the API server rejected (429), since it started."""
    return apiserver_metric(cluster, "apiserver_flowcontrol_rejected_requests_total",
                            priority_level=level)
