"""Reads for a person at a terminal (`check`, `explain`): one object at a time, on demand.

The operator uses none of these while it works (it reads from watch caches); at start it asks
the server's version once. They live apart from the client so
that the client stays the operator's short list of calls.
"""

from __future__ import annotations

from controller.kube.api import path
from controller.kube.client import Kube, Obj


class Inspection:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def server_version(self) -> str:
        version = self.kube.json("GET", "/version")
        return str(version.get("gitVersion"))

    def crd_served_versions(self, name: str) -> list[str] | None:
        """The served versions of a CustomResourceDefinition; None if it is not installed."""
        crd = self.kube.get_or_none(
            path("apiextensions.k8s.io/v1", "customresourcedefinitions", name=name))
        if crd is None:
            return None
        versions = (crd.get("spec") or {}).get("versions") or []
        return [str(v.get("name")) for v in versions if v.get("served")]

    def configmap_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """A ConfigMap's data ({} when it has none); None if it does not exist."""
        cm = self.kube.get_or_none(path("v1", "configmaps", namespace, name))
        return None if cm is None else dict(cm.get("data") or {})

    def can_i(
        self, group: str, resource: str, verb: str, namespace: str | None, subresource: str = ""
    ) -> bool:
        """A SelfSubjectAccessReview: may this client do that?"""
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": _attributes(group, resource, verb, namespace,
                                                       subresource)},
        }
        answer = self.kube.json(
            "POST", path("authorization.k8s.io/v1", "selfsubjectaccessreviews"), review)
        return bool((answer.get("status") or {}).get("allowed"))

    def may(self, account: tuple[str, str], group: str, resource: str, verb: str,
            namespace: str | None, subresource: str = "") -> bool:
        """A SubjectAccessReview: may that ServiceAccount (namespace, name) do that? The groups
        are those the API server gives every ServiceAccount's token: a binding to one of them
        counts, as it does for the operator itself."""
        ns, name = account
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{ns}:{name}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}",
                           "system:authenticated"],
                "resourceAttributes": _attributes(group, resource, verb, namespace, subresource),
            },
        }
        answer = self.kube.json(
            "POST", path("authorization.k8s.io/v1", "subjectaccessreviews"), review)
        return bool((answer.get("status") or {}).get("allowed"))

    def get_service_account(self, namespace: str, name: str) -> Obj | None:
        return self.kube.get_or_none(path("v1", "serviceaccounts", namespace, name))

    def list_deployments(self, namespace: str) -> list[Obj]:
        return self.kube.items(path("apps/v1", "deployments", namespace))

    def list_namespaces(self, selector: str) -> list[Obj]:
        return self.kube.items(path("v1", "namespaces"), labelSelector=selector)

    def get_namespace(self, name: str) -> Obj | None:
        return self.kube.get_or_none(path("v1", "namespaces", name=name))

    def get_node(self, name: str) -> Obj | None:
        return self.kube.get_or_none(path("v1", "nodes", name=name))

    def list_pods(self, namespace: str, selector: str) -> list[Obj]:
        return self.kube.items(path("v1", "pods", namespace), labelSelector=selector)

    def list_events(self, namespace: str, uid: str) -> list[Obj]:
        """Events about the object with this uid, oldest first."""
        events = self.kube.items(path("v1", "events", namespace),
                                 fieldSelector=f"involvedObject.uid={uid}")
        return sorted(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime")))


def _attributes(group: str, resource: str, verb: str, namespace: str | None,
                subresource: str) -> dict[str, str | None]:
    return {"group": group, "resource": resource, "subresource": subresource or None,
            "verb": verb, "namespace": namespace}
