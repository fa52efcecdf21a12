"""Helpers for e2e scenarios: runs, the pods Tekton would make, and where things landed."""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Mapping
from typing import Any, cast

from kubernetes import client, watch

from controller.core.basics import names
from e2e.harness.cluster import ClusterHandle, create_once, present
from tests import factories

TEKTON = ("tekton.dev", "v1")


class Scenario:
    """One namespace's worth of objects, created through the real API server."""

    def __init__(self, cluster: ClusterHandle, namespace: str) -> None:
        self.cluster = cluster
        self.ns = namespace
        self.api = cluster.api_client()
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]

    # -- objects -------------------------------------------------------------------------------
    def policy(self, name: str, spec: Mapping[str, Any], wait: bool = False) -> None:
        """A CoschedulingPolicy of the namespace; with `wait`, returns once the operator has
        read it (its status says Ready), so that runs started next are decided under it."""
        group = (names.POLICY_GROUP, names.POLICY_VERSION)
        self.custom.create_namespaced_custom_object(*group, self.ns, names.POLICY_PLURAL, {
            "apiVersion": "/".join(group), "kind": names.POLICY_KIND,
            "metadata": {"name": name}, "spec": dict(spec)})

        def ready() -> bool:
            obj = cast(dict[str, Any], self.custom.get_namespaced_custom_object(
                *group, self.ns, names.POLICY_PLURAL, name))
            conds = (obj.get("status") or {}).get("conditions") or []
            return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)

        if wait:
            self.cluster.wait_for(ready, timeout=30, what=f"policy {name} Ready")

    def pvc(self, name: str, size: str = "1Gi") -> None:
        self.core.create_namespaced_persistent_volume_claim(
            self.ns,
            {  # type: ignore[arg-type]
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "local-wffc",
                    "resources": {"requests": {"storage": size}},
                },
            },
        )

    def pv_on(self, node: str, claim: str) -> str:
        """A local PV on `node` that only `claim` of this namespace may bind."""
        name = f"pv-{uuid.uuid4().hex[:10]}"
        self.cluster.add_local_pv(name, node)
        self.core.patch_persistent_volume(
            name,
            {
                "spec": {
                    "claimRef": {
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "namespace": self.ns,
                        "name": claim,
                    }
                }
            },
        )
        return name

    def claim_on(self, node: str, name: str = "source") -> None:
        """A claim whose only possible volume lives on `node`."""
        self.pvc(name)
        self.pv_on(node, name)

    def run(self, name: str = "build", **kw: Any) -> dict[str, Any]:
        body = factories.pipelinerun(name=name, namespace=self.ns, uid="", succeeded=None, **kw)
        meta = body["metadata"]
        for key in ("uid", "creationTimestamp", "generation"):
            meta.pop(key)
        body.pop("status")
        # The client types custom objects as `object`: they are the API server's JSON, a dict.
        return create_once(
            lambda: cast(dict[str, Any], self.custom.create_namespaced_custom_object(
                *TEKTON, self.ns, "pipelineruns", body
            )),
            lambda: cast(dict[str, Any], self.custom.get_namespaced_custom_object(
                *TEKTON, self.ns, "pipelineruns", name
            )),
        )

    def task_pod(
        self,
        run: Mapping[str, Any],
        task: str,
        *,
        claims: tuple[str, ...] = ("source",),
        affinity: dict[str, Any] | None = None,
        with_uid: bool = True,
    ) -> str:
        meta = run["metadata"]
        pod = factories.taskrun_pod(
            run=meta["name"],
            run_uid=meta["uid"] if with_uid else None,
            task=task,
            namespace=self.ns,
            affinity=affinity,
            claim=claims[0] if claims else "",
        )
        pod["metadata"].pop("ownerReferences")
        if not claims:
            pod["spec"]["volumes"][1] = {"name": "ws-k7x2p", "emptyDir": {}}
        for i, claim in enumerate(claims[1:], start=1):
            pod["spec"]["volumes"].append(
                {"name": f"ws-extra{i}", "persistentVolumeClaim": {"claimName": claim}}
            )
            pod["spec"]["containers"][0]["volumeMounts"].append(
                {"name": f"ws-extra{i}", "mountPath": f"/workspace/{i}"}
            )
        pod["metadata"]["annotations"].update(meta.get("annotations") or {})
        self.core.create_namespaced_pod(self.ns, pod)  # type: ignore[arg-type]
        return str(pod["metadata"]["name"])

    def pinned_now(self, run: Mapping[str, Any]) -> bool:
        """Would a TaskRun pod of the run created now be pinned? (a dry-run creation: admission
        runs, nothing is stored). Policy and binding changes reach the API server's admission
        within about a second, a webhook's view at once: tests wait on this, not on a clock."""
        meta = run["metadata"]
        pod = factories.taskrun_pod(run=meta["name"], run_uid=meta["uid"], namespace=self.ns)
        pod["metadata"].pop("ownerReferences")
        pod["metadata"]["name"] = f"probe-{uuid.uuid4().hex[:8]}"
        pod["spec"]["volumes"][1] = {"name": "ws-k7x2p", "emptyDir": {}}
        made = self.core.create_namespaced_pod(self.ns, pod, dry_run="All")  # type: ignore[arg-type]
        return present(made.spec).affinity is not None

    def finish(self, run: Mapping[str, Any], status: str = "True") -> None:
        self.custom.patch_namespaced_custom_object_status(
            *TEKTON,
            self.ns,
            "pipelineruns",
            run["metadata"]["name"],
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Succeeded",
                            "status": status,
                            "reason": "Done",
                            "lastTransitionTime": time.strftime(
                                "%Y-%m-%dT%H:%M:%SZ", time.gmtime()
                            ),
                        }
                    ]
                }
            },
        )

    def delete_run(self, run: Mapping[str, Any]) -> None:
        self.custom.delete_namespaced_custom_object(
            *TEKTON, self.ns, "pipelineruns", run["metadata"]["name"]
        )

    # -- observations -------------------------------------------------------------------------
    def balloons(self, run: Mapping[str, Any] | None = None) -> list[Any]:
        selector = names.BALLOON_SELECTOR
        if run is not None:
            selector += f",{names.LABEL_RUN_UID}={run['metadata']['uid']}"
        return list(self.apps.list_namespaced_stateful_set(self.ns, label_selector=selector).items)

    def first_balloon(self, timeout: int = 60) -> bool:
        """Returns as soon as the namespace holds a balloon (False at the timeout): a watch, so
        within milliseconds of its creation. Polling a list missed a leader's first round: 110
        of 200 balloons were made by the pause after a poll of a page of 10 saw them, 200 of 200
        while each poll decoded every StatefulSet (31 of 200 with this, run alone)."""
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        try:
            for _ in stream.stream(  # type: ignore[no-untyped-call]
                    self.apps.list_namespaced_stateful_set, self.ns,
                    label_selector=names.BALLOON_SELECTOR, timeout_seconds=timeout):
                return True
        finally:
            stream.stop()  # type: ignore[no-untyped-call]
        return False

    def balloon_node(self, run: Mapping[str, Any], timeout: float = 60) -> str:
        def bound() -> str | None:
            pods = self.core.list_namespaced_pod(
                self.ns,
                label_selector=f"{names.BALLOON_SELECTOR},{names.LABEL_RUN_UID}={run['metadata']['uid']}",
            ).items
            return present(pods[0].spec).node_name if pods else None

        return self.cluster.wait_for(
            bound, timeout=timeout, what=f"balloon pod of {run['metadata']['name']} bound"
        )

    def pod_node(self, name: str, timeout: float = 60) -> str:
        return self.cluster.wait_for(
            lambda: present(self.core.read_namespaced_pod(name, self.ns).spec).node_name,
            timeout=timeout,
            what=f"pod {name} bound",
        )

    def pod(self, name: str) -> dict[str, Any]:
        pod: dict[str, Any] = self.api.sanitize_for_serialization(  # type: ignore[no-untyped-call]
            self.core.read_namespaced_pod(name, self.ns)
        )
        return pod

    def wait_no_balloon(self, run: Mapping[str, Any], timeout: float = 60) -> None:
        self.cluster.wait_for(
            lambda: not self.balloons(run),
            timeout=timeout,
            what=f"balloon of {run['metadata']['name']} gone",
        )

    def wait_balloon(self, run: Mapping[str, Any], timeout: float = 30) -> Any:
        return self.cluster.wait_for(
            lambda: self.balloons(run),
            timeout=timeout,
            what=f"balloon of {run['metadata']['name']}",
        )[0]

    def events(self, reason: str) -> list[Any]:
        """The namespace's Events of this reason (picked by the API server: see anchored_nodes
        in tekton_runs.py)."""
        return [e for e in self.core.list_namespaced_event(
            self.ns, field_selector=f"reason={reason}").items if e.reason == reason]


def user_affinity() -> dict[str, Any]:
    return copy.deepcopy(
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "type", "operator": "In", "values": ["kwok"]}
                            ]
                        }
                    ]
                }
            },
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"cache": "warm"}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            },
        }
    )
