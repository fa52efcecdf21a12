"""kopf adapters for policies: each handler hands its object to the Operator and decides
nothing. Runs and pods come through our own intake (faces/streams.py): kopf decoded every run
and TaskRun-pod event of the cluster before a filter of ours could drop it. Nodes come through
the watch caches (kube/caches.py), whose first list a new leader waits for (kopf listed them
again after it, and told every heartbeat).

No handler here writes annotations or finalizers onto Tekton's objects: @kopf.on.event keeps
no state on the watched object (see shared notes), and deletions are left to ownerReferences.
"""

from __future__ import annotations

import functools
from typing import Any

import kopf
import structlog

from controller.core.basics import names
from controller.kube import connection
from controller.operator.policies import status_key
from controller.operator.runs import Operator

log = structlog.get_logger(__name__)

registry = kopf.OperatorRegistry()


@kopf.on.login(registry=registry)
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    # As kube.connection.load_client_config: the cluster named on the command line, else the
    # in-cluster service account, else the kubeconfig.
    named = connection.kopf_credentials()
    if named is None:
        return kopf.login_via_client(**kwargs)
    return kopf.ConnectionInfo(**named, trust_env=kwargs["settings"].networking.trust_env)


def _op(memo: Any) -> Operator:
    operator: Operator = memo.operator
    return operator


@kopf.on.event(names.POLICY_GROUP, names.POLICY_VERSION, names.POLICY_PLURAL, registry=registry)
def policy_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    if type != "DELETED":
        # Put on the work queue under the policy's key, as the resync's look at it: one worker
        # at a time keeps its status, from the view's newest copy (checked first: the leader's
        # own status writes, where a pipeline last ran, change nothing reported, ask nothing).
        op, meta = _op(memo), body.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        key = status_key(ns, name)  # its slot too: one look waiting is enough
        op.soon(key, key, functools.partial(op.policies.look, ns, name))
