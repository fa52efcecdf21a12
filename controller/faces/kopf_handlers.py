"""kopf adapters: each handler hands its object to the Operator and decides nothing.

No handler here writes annotations or finalizers onto Tekton's objects: @kopf.on.event keeps
no state on the watched object (see shared notes), and deletions are left to ownerReferences.
"""

from __future__ import annotations

from typing import Any

import kopf

from controller.core import names, tekton
from controller.operator.runs import Operator

registry = kopf.OperatorRegistry()

BALLOON_LABELS = {names.LABEL_MANAGED_BY: names.APP, names.LABEL_COMPONENT: names.COMPONENT_BALLOON}
ROOM_LABELS = {
    names.LABEL_MANAGED_BY: names.APP, names.LABEL_COMPONENT: names.COMPONENT_RESERVATION,
}


def pod_label_selector(tekton_managed_by: str) -> str:
    """What the pod watch asks the API server for: balloon pods and Tekton's TaskRun pods. The
    handlers' own label filters then tell the two apart. Without it, every pod event of the
    cluster reaches the leader, to be parsed and dropped (about 1 ms of CPU each, measured by
    bench/pod_churn.py)."""
    values = ",".join(sorted({names.APP, tekton_managed_by}))
    return f"{names.LABEL_MANAGED_BY} in ({values})"


@kopf.on.login(registry=registry)
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    # In-cluster service account, else the kubeconfig: as kube.connection.load_client_config.
    return kopf.login_via_client(**kwargs)


def _op(memo: Any) -> Operator:
    operator: Operator = memo.operator
    return operator


# kopf has no namespace-label selector: runs and pods of namespaces that did not opt in reach
# it, and these filters, called in its event loop, drop them before it hands a handler to a
# thread (with kopf's diff base emptied, reconciler.EventsOnly: bench-scale's runs of a
# namespace that did not opt in, 123.7 ms each before, 51 ms after; docs/figures.md).
def _run_concerns_us(namespace: str | None, uid: str | None, labels: kopf.Labels,
                     memo: kopf.Memo, **_: Any) -> bool:
    return _op(memo).concerns(namespace or "", uid or "", labels)


def _pod_concerns_us(namespace: str | None, labels: kopf.Labels, memo: kopf.Memo,
                     **_: Any) -> bool:
    run = tekton.task_run_pod_run(labels)
    return run is not None and _op(memo).concerns(namespace or "", run.uid, labels)


@kopf.on.event(tekton.GROUP, tekton.VERSION, "pipelineruns", when=_run_concerns_us,
               registry=registry)
def pipelinerun_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    if type == "DELETED":
        _op(memo).forget_run(body)
    else:
        _op(memo).reconcile_run(body)


@kopf.on.event("v1", "pods", labels=BALLOON_LABELS, registry=registry)
def balloon_pod_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    _op(memo).placement.on_balloon_pod(body, deleted=type == "DELETED")
    _op(memo).capacity.on_pod(body)


@kopf.on.event("v1", "pods", labels=ROOM_LABELS, registry=registry)
def room_pod_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    _op(memo).capacity.on_room_pod(body, deleted=type == "DELETED")


@kopf.on.event("v1", "pods", labels={tekton.LABEL_TASK_RUN: kopf.PRESENT},
               when=_pod_concerns_us, registry=registry)
def task_pod_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    _op(memo).placement.on_task_pod(body, deleted=type == "DELETED")
    _op(memo).capacity.on_pod(body)


@kopf.on.event("v1", "nodes", registry=registry)
def node_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    _op(memo).anchors.on_node(body, deleted=type == "DELETED")


@kopf.on.event(names.POLICY_GROUP, names.POLICY_VERSION, names.POLICY_PLURAL, registry=registry)
def policy_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    if type != "DELETED":
        _op(memo).report_policy(body)
