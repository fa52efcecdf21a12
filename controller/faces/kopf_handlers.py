"""kopf adapters for nodes and policies: each handler hands its object to the Operator and
decides nothing. Runs and pods come through our own intake (faces/streams.py): kopf decoded
every run and TaskRun-pod event of the cluster before a filter of ours could drop it.

No handler here writes annotations or finalizers onto Tekton's objects: @kopf.on.event keeps
no state on the watched object (see shared notes), and deletions are left to ownerReferences.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf
import structlog

from controller.core import names
from controller.kube import errors
from controller.kube.client import Kube
from controller.operator.runs import Operator

log = structlog.get_logger(__name__)

registry = kopf.OperatorRegistry()


@kopf.on.login(registry=registry)
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    # In-cluster service account, else the kubeconfig: as kube.connection.load_client_config.
    return kopf.login_via_client(**kwargs)


def _op(memo: Any) -> Operator:
    operator: Operator = memo.operator
    return operator


@kopf.on.event("v1", "nodes", registry=registry)
def node_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    on_node(_op(memo), body, deleted=type == "DELETED")


def on_node(operator: Operator, node: Mapping[str, Any], deleted: bool = False) -> None:
    operator.warming.on_node(node, deleted=deleted)  # the images each node holds
    operator.anchors.on_node(node, deleted=deleted)  # the nodes capacity and anchors read


def know_nodes(operator: Operator, kube: Kube) -> None:
    """Every node as the API server has it now, before a new leader decides anything. kopf's
    node watch keeps them current, but it starts with the streams, and a new leader's first
    resync round decides the runs it lists before kopf has listed the nodes: with no node
    known, its first runs were anchored blind to their images and to the nodes' room (seen in
    e2e: a run made while no replica led, anchored away from its image). A list that fails is
    said and left to kopf's watch. (A node deleted between this list and kopf's own first list
    stays known, as kopf never saw it to say it went: a window of milliseconds, once.)"""
    try:
        nodes = kube.list_nodes()
    except Exception as exc:
        failure = errors.classify(exc)
        (log.exception if failure.bug else log.warning)(
            "could not list the nodes before leading; the node watch will tell",
            reason=failure.reason, error=str(exc))
        return
    for node in nodes:
        on_node(operator, node)


@kopf.on.event(names.POLICY_GROUP, names.POLICY_VERSION, names.POLICY_PLURAL, registry=registry)
def policy_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    if type != "DELETED":
        # Checked first against the watch's copies: the leader's own status writes (where a
        # pipeline last ran) change nothing that is reported, and ask for nothing.
        _op(memo).policies.report(body, cached=True)
