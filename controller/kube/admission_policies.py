"""Policy mode: the chart's MutatingAdmissionPolicy and the bindings the operator keeps.

Through the API's generic path, so that the same calls serve admissionregistration v1 and the
v1beta1 that 1.34 and 1.35 serve behind a feature gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from controller.kube.client import Kube, Obj

GROUP = "admissionregistration.k8s.io"


class AdmissionPolicies:
    def __init__(self, kube: Kube, version: str = "v1") -> None:
        self.kube = kube
        self.version = version

    def get_policy(self, name: str) -> Obj | None:
        return self.kube.get_or_none(
            self.kube.custom.get_cluster_custom_object,
            GROUP,
            self.version,
            "mutatingadmissionpolicies",
            name,
        )

    def list_bindings(self, selector: str) -> list[Obj]:
        return self.kube.items(
            self.kube.custom.list_cluster_custom_object,
            GROUP,
            self.version,
            "mutatingadmissionpolicybindings",
            label_selector=selector,
        )

    def create_binding(self, body: Mapping[str, Any]) -> None:
        self.kube.custom.create_cluster_custom_object(
            GROUP,
            self.version,
            "mutatingadmissionpolicybindings",
            dict(body),
            _request_timeout=self.kube.timeout,
        )

    def replace_binding(self, body: Mapping[str, Any], resource_version: str) -> None:
        meta = {**body["metadata"], "resourceVersion": resource_version}
        self.kube.custom.replace_cluster_custom_object(
            GROUP,
            self.version,
            "mutatingadmissionpolicybindings",
            meta["name"],
            {**body, "metadata": meta},
            _request_timeout=self.kube.timeout,
        )

    def delete_binding(self, name: str) -> None:
        try:
            self.kube.custom.delete_cluster_custom_object(
                GROUP,
                self.version,
                "mutatingadmissionpolicybindings",
                name,
                _request_timeout=self.kube.timeout,
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
