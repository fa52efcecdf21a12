"""Policy mode: the chart's MutatingAdmissionPolicy and the bindings the operator keeps.

By path, so that the same calls serve admissionregistration v1 and the
v1beta1 that 1.34 and 1.35 serve behind a feature gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from controller.kube.api import path
from controller.kube.client import Kube, Obj

GROUP = "admissionregistration.k8s.io"
BINDINGS = "mutatingadmissionpolicybindings"


class AdmissionPolicies:
    def __init__(self, kube: Kube, version: str = "v1") -> None:
        self.kube = kube
        self.version = version

    def _path(self, plural: str, name: str | None = None) -> str:
        return path(f"{GROUP}/{self.version}", plural, name=name)

    def get_policy(self, name: str) -> Obj | None:
        return self.kube.get_or_none(self._path("mutatingadmissionpolicies", name))

    def list_bindings(self, selector: str) -> list[Obj]:
        return self.kube.items(self._path(BINDINGS), labelSelector=selector)

    def create_binding(self, body: Mapping[str, Any]) -> None:
        self.kube.send("POST", self._path(BINDINGS), dict(body))

    def replace_binding(self, body: Mapping[str, Any], resource_version: str) -> None:
        meta = {**body["metadata"], "resourceVersion": resource_version}
        self.kube.send("PUT", self._path(BINDINGS, meta["name"]), {**body, "metadata": meta})

    def delete_binding(self, name: str) -> None:
        try:
            self.kube.send("DELETE", self._path(BINDINGS, name))
        except ApiException as exc:
            if exc.status != 404:
                raise
