"""Two namespaces alike but for their admission: one mutated by the policy, one by a webhook.
The parity suite and the parity benchmark create the same pods in both and compare."""

from __future__ import annotations

import copy
import uuid
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.core.admission import admission_policy, affinity
from controller.core.basics import names
from e2e.harness import chart
from e2e.harness.cluster import ClusterHandle
from e2e.harness.coscheduler import Coscheduler


class Pair:
    """A namespace mutated by the policy and one mutated by the webhook, alike otherwise."""

    def __init__(self, cluster: ClusterHandle, policy_ns: str, webhook_ns: str) -> None:
        self.cluster, self.policy_ns, self.webhook_ns = cluster, policy_ns, webhook_ns

    def create(self, pod: dict[str, Any], namespace: str) -> tuple[int, dict[str, Any] | str]:
        body = copy.deepcopy(pod)
        body.setdefault("metadata", {})["namespace"] = namespace
        body["metadata"]["name"] = f"p-{uuid.uuid4().hex[:10]}"
        with self.cluster.api_client() as api:
            try:
                made = client.CoreV1Api(api).create_namespaced_pod(namespace, body, dry_run="All")  # type: ignore[arg-type]
            except ApiException as e:
                return e.status, "refused"
            except ValueError:
                # The client's own models refuse it (a null label value): it never reaches the
                # API server, in either mode.
                return 0, "refused by the client"
            return 201, api.sanitize_for_serialization(made)

    def both(self, pod: dict[str, Any]) -> tuple[Any, Any]:
        return self.create(pod, self.policy_ns), self.create(pod, self.webhook_ns)

    def assert_same(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        return assert_alike(*self.both(pod))


def assert_alike(
    policy: tuple[int, dict[str, Any] | str], webhook: tuple[int, dict[str, Any] | str]
) -> dict[str, Any] | None:
    """The same answer from both modes: the same status, and the same pod if it was taken."""
    (p_status, p_pod), (w_status, w_pod) = policy, webhook
    assert p_status == w_status, (p_status, w_status, p_pod, w_pod)
    if p_status != 201:
        return None
    assert isinstance(p_pod, dict) and isinstance(w_pod, dict)
    assert _comparable(p_pod) == _comparable(w_pod)
    return p_pod


TOKEN_VOLUME = "kube-api-access-"


def _comparable(pod: dict[str, Any]) -> dict[str, Any]:
    """What admission decides: the spec, the labels and annotations. Names, namespaces, uids
    and times differ by construction, and so does the service-account token volume the API
    server adds (kube-api-access-<random>)."""
    meta = pod["metadata"]
    spec = copy.deepcopy(pod["spec"])
    spec["volumes"] = [v for v in spec.get("volumes") or []
                       if not v["name"].startswith(TOKEN_VOLUME)]
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        container["volumeMounts"] = [m for m in container.get("volumeMounts") or []
                                     if not m["name"].startswith(TOKEN_VOLUME)]
    return {"spec": spec, "labels": meta.get("labels"), "annotations": meta.get("annotations")}


def terms(pod: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (
        ((pod["spec"].get("affinity") or {}).get("podAffinity") or {}).get(affinity.REQUIRED) or []
    )
    return found


def install_policy(cluster: ClusterHandle) -> None:
    """The chart's policies as they render in policy mode, and the default binding the operator
    would keep (made here by the same pure function)."""
    policies = [d for d in chart.render({"admission.mode": "policy"})
                if d["kind"] == "MutatingAdmissionPolicy"]
    with cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)
        default, with_param = (cast(dict[str, Any], custom.create_cluster_custom_object(
            "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies", policy))
            for policy in policies)
        mode = admission_policy.PolicyMode(
            policy_name=default["metadata"]["name"], policy_uid=default["metadata"]["uid"],
            namespace_label=names.NAMESPACE_LABEL, namespace_label_value="true",
            excluded_namespaces=("kube-system",), default_topology_key="kubernetes.io/hostname",
            custom_policy_uid=with_param["metadata"]["uid"])
        for binding in admission_policy.desired(mode, {}):
            custom.create_cluster_custom_object(
                "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings", binding)


def webhook_replica(cluster: ClusterHandle, label: str, name: str) -> Coscheduler:
    """A webhook-only replica (no reconciler) for the namespaces carrying `label`, registered
    under its own webhook configuration; the opt-in label stays the policy's."""
    replica = Coscheduler(cluster, name=name, env_overrides={
        "POD_NAMESPACE": "default", "COSCHEDULER_RECONCILE": "false",
        "COSCHEDULER_ADMISSION_MODE": "webhook",
        "COSCHEDULER_NAMESPACE_LABEL": label, "COSCHEDULER_LOG_LEVEL": "WARNING"})
    replica.start()
    replica.register_webhook(name=name, label=label)
    return replica
