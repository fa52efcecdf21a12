"""kopf adapters for nodes and policies: each handler hands its object to the Operator and
decides nothing. Runs and pods come through our own intake (faces/streams.py): kopf decoded
every run and TaskRun-pod event of the cluster before a filter of ours could drop it.

No handler here writes annotations or finalizers onto Tekton's objects: @kopf.on.event keeps
no state on the watched object (see shared notes), and deletions are left to ownerReferences.
"""

from __future__ import annotations

from typing import Any

import kopf

from controller.core import names
from controller.operator.runs import Operator

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
    operator = _op(memo)
    operator.warming.on_node(body, deleted=type == "DELETED")
    operator.anchors.on_node(body, deleted=type == "DELETED")


@kopf.on.event(names.POLICY_GROUP, names.POLICY_VERSION, names.POLICY_PLURAL, registry=registry)
def policy_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    if type != "DELETED":
        # Checked first against the watch's copies: the leader's own status writes (where a
        # pipeline last ran) change nothing that is reported, and ask for nothing.
        _op(memo).policies.report(body, cached=True)
