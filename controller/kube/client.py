"""What the operator asks of the API server (with kube/api.py under it, the only modules that
talk to it). Blocking calls; run them off the event loop.

Objects go in and come out as plain dicts in the API's own camelCase shape: the pure modules
never see client models.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import kubernetes
import structlog
from kubernetes.client.exceptions import ApiException

from controller.core import names, tekton
from controller.kube.api import Api
from controller.kube.api import ApiError as ApiError  # what the layers above catch
from controller.kube.api import Obj as Obj
from controller.kube.api import api_message as api_message

log = structlog.get_logger(__name__)


class Kube(Api):
    """What the operator asks of the API server, by what it asks about."""

    # -- balloons ------------------------------------------------------------------------

    def get_statefulset(self, namespace: str, name: str) -> Obj | None:
        return self.get_or_none(self.apps.read_namespaced_stateful_set, name, namespace)

    def create_statefulset(self, manifest: Mapping[str, Any]) -> tuple[Obj, bool]:
        """Create, or return the existing one: (object, created)."""
        meta = manifest["metadata"]
        try:
            return self.json(
                self.apps.create_namespaced_stateful_set, meta["namespace"], manifest
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
        self.send(self.apps.patch_namespaced_stateful_set, meta["name"], meta["namespace"], patch)
        pod_name = f"{meta['name']}-0"
        pod = self.get_or_none(self.core.read_namespaced_pod, pod_name, meta["namespace"])
        if pod is not None and not (pod.get("spec") or {}).get("nodeName"):
            self.delete_pod(meta["namespace"], pod_name, uid=pod["metadata"]["uid"])

    def create_pod(self, manifest: Mapping[str, Any]) -> bool:
        """Creates it; False if one of that name exists (it may be ending: asked again later)."""
        return self._create_new(self.core.create_namespaced_pod, manifest)

    def delete_pod(self, namespace: str, name: str, uid: str, grace: int | None = None) -> None:
        """Deletes that pod (the uid precondition spares a successor of the same name); grace
        0 removes it at once, as for a pod on a node that will not confirm its end."""
        try:
            self.send(
                self.core.delete_namespaced_pod,
                name,
                namespace,
                body=kubernetes.client.V1DeleteOptions(
                    preconditions=kubernetes.client.V1Preconditions(uid=uid),
                    grace_period_seconds=grace,
                ),
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise

    def release_pod_gate(self, namespace: str, name: str, uid: str,
                         patch: Mapping[str, Any]) -> bool:
        """A strategic merge patch of that pod's scheduling gates (core/gate.py). False for a
        pod gone, or replaced by one of the same name (the uid precondition): left alone."""
        body = {**patch, "metadata": {"uid": uid}}
        try:
            self.send(self.core.patch_namespaced_pod, name, namespace, body,
                      _content_type="application/strategic-merge-patch+json")
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
            return False
        return True

    def delete_statefulset(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """True if deleted now; False if already gone. A uid precondition spares a successor."""
        options = kubernetes.client.V1DeleteOptions(
            propagation_policy="Background",
            preconditions=kubernetes.client.V1Preconditions(uid=uid) if uid else None,
        )
        try:
            self.send(self.apps.delete_namespaced_stateful_set, name, namespace, body=options)
            return True
        except ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise

    def list_balloons(self) -> list[Obj]:
        return self.items(
            self.apps.list_stateful_set_for_all_namespaces, label_selector=names.BALLOON_SELECTOR
        )

    def list_balloon_pods(self, namespace: str, run_uid: str) -> list[Obj]:
        selector = f"{names.BALLOON_SELECTOR},{names.LABEL_RUN_UID}={run_uid}"
        return self.items(self.core.list_namespaced_pod, namespace, label_selector=selector)

    def list_run_pods(self, namespace: str, run_name: str) -> list[Obj]:
        """The TaskRun pods of a run, as the API server has them now."""
        selector = f"{tekton.LABEL_PIPELINE_RUN}={run_name},{tekton.LABEL_TASK_RUN}"
        return self.items(self.core.list_namespaced_pod, namespace, label_selector=selector)

    def annotate_statefulset(
        self, namespace: str, name: str, annotations: Mapping[str, str]
    ) -> None:
        self.send(self.apps.patch_namespaced_stateful_set, name, namespace,
                  {"metadata": {"annotations": dict(annotations)}})

    # -- Tekton and storage --------------------------------------------------------------

    def list_pvcs(self, namespace: str) -> list[Obj]:
        return self.items(self.core.list_namespaced_persistent_volume_claim, namespace)

    def get_pvc(self, namespace: str, name: str) -> Obj | None:
        return self.get_or_none(self.core.read_namespaced_persistent_volume_claim, name, namespace)

    def get_pv(self, name: str) -> Obj | None:
        return self.get_or_none(self.core.read_persistent_volume, name)

    def create_pdb(self, manifest: Mapping[str, Any]) -> bool:
        """Creates it; False if one of that name exists (it is left as it is)."""
        return self._create_new(self.policy.create_namespaced_pod_disruption_budget, manifest)

    def delete_pdb(self, namespace: str, name: str, uid: str) -> None:
        """Deletes that budget (the uid precondition spares a successor); gone already is done."""
        options = kubernetes.client.V1DeleteOptions(
            preconditions=kubernetes.client.V1Preconditions(uid=uid))
        try:
            self.send(self.policy.delete_namespaced_pod_disruption_budget, name, namespace,
                      body=options)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise

    def get_pipelinerun(self, namespace: str, name: str) -> Obj | None:
        return self.get_or_none(
            self.custom.get_namespaced_custom_object,
            tekton.GROUP,
            tekton.VERSION,
            namespace,
            "pipelineruns",
            name,
        )

    def list_pipelineruns(self, namespace: str | None = None) -> list[Obj]:
        """Every PipelineRun (of the namespace, if one is given), a page of 500 at a time."""
        if namespace:
            return self._pages(self.custom.list_namespaced_custom_object, tekton.GROUP,
                               tekton.VERSION, namespace, "pipelineruns")
        return self._pages(self.custom.list_cluster_custom_object, tekton.GROUP,
                           tekton.VERSION, "pipelineruns")

    def list_nodes(self) -> list[Obj]:
        return self._pages(self.core.list_node)

    def _pages(self, fn: Callable[..., Any], *args: Any) -> list[Obj]:
        out: list[Obj] = []
        token = None
        while True:
            page = self.json(fn, *args, limit=500, **({"_continue": token} if token else {}))
            out.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return out

    def patch_tekton(
        self, namespace: str, plural: str, name: str, patch: Mapping[str, Any]
    ) -> None:
        """A merge patch of a PipelineRun or TaskRun (the mark of an anchored run, core/mark.py);
        one that is gone meanwhile is left."""
        try:
            self.send(self.custom.patch_namespaced_custom_object,
                      tekton.GROUP, tekton.VERSION, namespace, plural, name, dict(patch))
        except ApiException as exc:
            if exc.status != 404:
                raise

    def list_task_runs(self, namespace: str, run_name: str) -> list[Obj]:
        return self.items(
            self.custom.list_namespaced_custom_object, tekton.GROUP, tekton.VERSION, namespace,
            "taskruns", label_selector=f"{tekton.LABEL_PIPELINE_RUN}={run_name}",
        )

    def list_nodepools(self) -> list[Obj]:
        """Karpenter's NodePools; none where Karpenter's API is not served."""
        try:
            return self.items(self.custom.list_cluster_custom_object, "karpenter.sh", "v1",
                              "nodepools")
        except ApiException as exc:
            if exc.status == 404:
                return []
            raise

    # -- our policy ----------------------------------------------------------------------

    def list_policies(self, namespace: str) -> list[Obj]:
        return self.items(
            self.custom.list_namespaced_custom_object,
            names.POLICY_GROUP,
            names.POLICY_VERSION,
            namespace,
            names.POLICY_PLURAL,
        )

    def patch_policy_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        try:
            self.send(
                self.custom.patch_namespaced_custom_object_status,
                names.POLICY_GROUP,
                names.POLICY_VERSION,
                namespace,
                names.POLICY_PLURAL,
                name,
                {"status": dict(status)},
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    # -- leader election ---------------------------------------------------------------

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        return self.get_or_none(self.coordination.read_namespaced_lease, name, namespace)

    def create_lease(self, body: Mapping[str, Any]) -> bool:
        """False if someone else created it first."""
        namespace = body["metadata"]["namespace"]
        return self._unless_conflict(self.coordination.create_namespaced_lease, namespace, body)

    def replace_lease(self, body: Mapping[str, Any]) -> bool:
        """False if the Lease changed since it was read (its resourceVersion is checked)."""
        meta = body["metadata"]
        return self._unless_conflict(
            self.coordination.replace_namespaced_lease, meta["name"], meta["namespace"], body
        )

    # -- events --------------------------------------------------------------------------

    def event_messages(self, namespace: str, kind: str, reason: str) -> dict[str, list[str]]:
        """The messages of a namespace's Events of a reason about objects of a kind, by the
        object's uid, newest last."""
        events = self.items(
            self.core.list_namespaced_event, namespace,
            field_selector=f"involvedObject.kind={kind},reason={reason}",
        )
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
        self.send(self.core.create_namespaced_event, namespace, event)
