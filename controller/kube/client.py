"""What the operator asks of the API server (with kube/api.py under it, the only modules that
talk to it). Blocking calls; run them off the event loop.

Objects go in and come out as plain dicts in the API's own camelCase shape: the pure modules
never see client models.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import structlog
from kubernetes.client.exceptions import ApiException

from controller.core.basics import names
from controller.core.model import tekton
from controller.kube.api import MERGE, STRATEGIC, Api, path
from controller.kube.api import ApiError as ApiError  # what the layers above catch
from controller.kube.api import Obj as Obj
from controller.kube.api import api_message as api_message

log = structlog.get_logger(__name__)

APPS, PDBS, LEASES = "apps/v1", "policy/v1", "coordination.k8s.io/v1"
TEKTON = f"{tekton.GROUP}/{tekton.VERSION}"
POLICIES = f"{names.POLICY_GROUP}/{names.POLICY_VERSION}"


def delete_options(uid: str | None, **more: Any) -> dict[str, Any]:
    """A DeleteOptions body: the uid precondition spares a successor of the same name."""
    options = {k: v for k, v in more.items() if v is not None}
    if uid:
        options["preconditions"] = {"uid": uid}
    return options


class Kube(Api):
    """What the operator asks of the API server, by what it asks about."""

    # -- balloons ------------------------------------------------------------------------

    def get_statefulset(self, namespace: str, name: str) -> Obj | None:
        return self.get_or_none(path(APPS, "statefulsets", namespace, name))

    def create_statefulset(self, manifest: Mapping[str, Any]) -> tuple[Obj, bool]:
        """Create, or return the existing one: (object, created)."""
        meta = manifest["metadata"]
        try:
            return self.json(
                "POST", path(APPS, "statefulsets", meta["namespace"]), dict(manifest)
            ), True
        except ApiException as exc:
            if exc.status != 409:
                raise
        existing = self.get_statefulset(meta["namespace"], meta["name"])
        if existing is None:  # deleted between our two calls; the next reconcile creates it
            raise RuntimeError(f"statefulset {meta['name']} vanished during create") from None
        return existing, False

    def replace_balloon_template(self, manifest: Mapping[str, Any]) -> None:
        """New pod template, then the unbound pod is deleted so the controller re-creates it."""
        meta = manifest["metadata"]
        patch = {"spec": {"template": manifest["spec"]["template"]}}
        self.send("PATCH", path(APPS, "statefulsets", meta["namespace"], meta["name"]), patch,
                  content_type=STRATEGIC)
        pod_name = f"{meta['name']}-0"
        pod = self.get_or_none(path("v1", "pods", meta["namespace"], pod_name))
        if pod is not None and not (pod.get("spec") or {}).get("nodeName"):
            self.delete_pod(meta["namespace"], pod_name, uid=pod["metadata"]["uid"])

    def create_pod(self, manifest: Mapping[str, Any]) -> bool:
        """Creates it; False if one of that name exists (it may be ending: asked again later)."""
        return self._create_new(path("v1", "pods", manifest["metadata"]["namespace"]),
                                manifest)

    def delete_pod(self, namespace: str, name: str, uid: str, grace: int | None = None) -> None:
        """Deletes that pod (the uid precondition spares a successor of the same name); grace
        0 removes it at once, as for a pod on a node that will not confirm its end."""
        try:
            self.send("DELETE", path("v1", "pods", namespace, name),
                      delete_options(uid, gracePeriodSeconds=grace))
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise

    def release_pod_gate(self, namespace: str, name: str, uid: str,
                         patch: Mapping[str, Any]) -> bool:
        """A strategic merge patch of that pod's scheduling gates (core/placement/gate.py). False
        for a pod gone, or replaced by one of the same name (the uid precondition): left alone."""
        body = {**patch, "metadata": {"uid": uid}}
        try:
            self.send("PATCH", path("v1", "pods", namespace, name), body,
                      content_type=STRATEGIC)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
            return False
        return True

    def delete_statefulset(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """True if deleted now; False if already gone. A uid precondition spares a successor."""
        try:
            self.send("DELETE", path(APPS, "statefulsets", namespace, name),
                      delete_options(uid, propagationPolicy="Background"))
            return True
        except ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise

    def list_balloons(self) -> list[Obj]:
        return self.items(path(APPS, "statefulsets"), labelSelector=names.BALLOON_SELECTOR)

    def list_balloon_pods(self, namespace: str, run_uid: str) -> list[Obj]:
        selector = f"{names.BALLOON_SELECTOR},{names.LABEL_RUN_UID}={run_uid}"
        return self.items(path("v1", "pods", namespace), labelSelector=selector)

    def list_run_pods(self, namespace: str, run_name: str) -> list[Obj]:
        """The TaskRun pods of a run, as the API server has them now."""
        selector = f"{tekton.LABEL_PIPELINE_RUN}={run_name},{tekton.LABEL_TASK_RUN}"
        return self.items(path("v1", "pods", namespace), labelSelector=selector)

    def list_unscheduled_placeholders(self) -> list[Obj]:
        """The placeholders of Tekton's assistant that have no node yet, in every namespace: few,
        whatever the cluster runs (the field selector is the API server's)."""
        return self.items(path("v1", "pods"),
                          labelSelector=f"{tekton.LABEL_COMPONENT}={tekton.AFFINITY_ASSISTANT_COMPONENT}",
                          fieldSelector="spec.nodeName=")

    def annotate_statefulset(
        self, namespace: str, name: str, annotations: Mapping[str, str]
    ) -> None:
        self.send("PATCH", path(APPS, "statefulsets", namespace, name),
                  {"metadata": {"annotations": dict(annotations)}}, content_type=STRATEGIC)

    # -- Tekton and storage --------------------------------------------------------------

    def list_pvcs(self, namespace: str) -> list[Obj]:
        return self.items(path("v1", "persistentvolumeclaims", namespace))

    def get_pvc(self, namespace: str, name: str) -> Obj | None:
        return self.get_or_none(path("v1", "persistentvolumeclaims", namespace, name))

    def get_pv(self, name: str) -> Obj | None:
        return self.get_or_none(path("v1", "persistentvolumes", name=name))

    def create_pdb(self, manifest: Mapping[str, Any]) -> bool:
        """Creates it; False if one of that name exists (it is left as it is)."""
        namespace = manifest["metadata"]["namespace"]
        return self._create_new(path(PDBS, "poddisruptionbudgets", namespace), manifest)

    def delete_pdb(self, namespace: str, name: str, uid: str) -> None:
        """Deletes that budget (the uid precondition spares a successor); gone already is done."""
        try:
            self.send("DELETE", path(PDBS, "poddisruptionbudgets", namespace, name),
                      delete_options(uid))
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise

    def get_pipelinerun(self, namespace: str, name: str) -> Obj | None:
        return self.get_or_none(path(TEKTON, "pipelineruns", namespace, name))

    def list_pipelineruns(self, namespace: str | None = None) -> list[Obj]:
        """Every PipelineRun (of the namespace, if one is given), a page of 500 at a time."""
        return self._pages(path(TEKTON, "pipelineruns", namespace))

    def list_nodes(self) -> list[Obj]:
        return self._pages(path("v1", "nodes"))

    def list_endpoint_slices(self, namespace: str, service: str) -> list[Obj]:
        """A Service's EndpointSlices: a draining webhook replica waits to leave them."""
        return self.items(path("discovery.k8s.io/v1", "endpointslices", namespace),
                          labelSelector=f"kubernetes.io/service-name={service}")

    def _pages(self, url_path: str) -> list[Obj]:
        out: list[Obj] = []
        token = None
        while True:
            page = self.json("GET", url_path, query={"limit": 500, "continue": token})
            out.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return out

    def patch_tekton(
        self, namespace: str, plural: str, name: str, patch: Mapping[str, Any]
    ) -> None:
        """A merge patch of a PipelineRun or TaskRun (the mark of an anchored run,
        core/placement/mark.py); one that is gone meanwhile is left."""
        try:
            self.send("PATCH", path(TEKTON, plural, namespace, name), dict(patch),
                      content_type=MERGE)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def list_task_runs(self, namespace: str, run_name: str) -> list[Obj]:
        return self.items(path(TEKTON, "taskruns", namespace),
                          labelSelector=f"{tekton.LABEL_PIPELINE_RUN}={run_name}")

    def list_nodepools(self) -> list[Obj]:
        """Karpenter's NodePools; none where Karpenter's API is not served."""
        try:
            return self.items(path("karpenter.sh/v1", "nodepools"))
        except ApiException as exc:
            if exc.status == 404:
                return []
            raise

    # -- our policy ----------------------------------------------------------------------

    def list_policies(self, namespace: str) -> list[Obj]:
        return self.items(path(POLICIES, names.POLICY_PLURAL, namespace))

    def patch_policy_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        try:
            self.send("PATCH", path(POLICIES, names.POLICY_PLURAL, namespace, name, "status"),
                      {"status": dict(status)}, content_type=MERGE)
        except ApiException as exc:
            if exc.status != 404:
                raise

    # -- leader election ---------------------------------------------------------------

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        return self.get_or_none(path(LEASES, "leases", namespace, name))

    def create_lease(self, body: Mapping[str, Any]) -> bool:
        """False if someone else created it first."""
        return self._unless_conflict("POST", path(LEASES, "leases", body["metadata"]["namespace"]),
                                     body)

    def replace_lease(self, body: Mapping[str, Any]) -> Obj | None:
        """The Lease as written; None if it changed since it was read (its resourceVersion is
        checked)."""
        meta = body["metadata"]
        try:
            return self.json("PUT", path(LEASES, "leases", meta["namespace"], meta["name"]),
                             dict(body))
        except ApiException as exc:
            if exc.status == 409:
                return None
            raise

    # -- events --------------------------------------------------------------------------

    def event_messages(self, namespace: str, kind: str, reason: str) -> dict[str, list[str]]:
        """The messages of a namespace's Events of a reason about objects of a kind, by the
        object's uid, newest last."""
        events = self.items(path("v1", "events", namespace),
                            fieldSelector=f"involvedObject.kind={kind},reason={reason}")
        events.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        said: dict[str, list[str]] = {}
        for e in events:
            uid = str((e.get("involvedObject") or {}).get("uid") or "")
            said.setdefault(uid, []).append(str(e.get("message") or ""))
        return said

    def post_event(
        self, involved: Mapping[str, Any], reason: str, message: str, *, warning: bool
    ) -> None:
        """A core/v1 Event about an object (involved: apiVersion, kind, metadata)."""
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name', 'object')[:200]}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": involved.get("apiVersion"),
                "kind": involved.get("kind"),
                "name": meta.get("name"),
                "namespace": namespace,
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": names.APP},
            "reportingComponent": names.APP,
            "reportingInstance": names.APP,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self.send("POST", path("v1", "events", namespace), event)
