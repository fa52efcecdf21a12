"""Pure: what Tekton's remote resolution has fetched for a run (a pipeline or tasks behind a
resolver: git, bundles, hub, cluster), read from the ResolutionRequests Tekton makes for it.

Tekton v1.15 makes each request owned by the PipelineRun (`resolution.tekton.dev/v1beta1`,
labelled with the resolver's name), resolves the run's pipeline first, then every task's
`taskRef` (finally tasks too) one per reconcile, and makes no TaskRun before all are resolved
(`pkg/reconciler/pipelinerun/pipelinerun.go`: `resolvePipelineState` returns at the first
request in progress). So while Tekton resolves, no pod of the run exists, and the anchor can
wait for the run's peak to be known at no cost to the run. A task's request carries its
`taskRef` params as Tekton substituted them, which is how `status.pipelineSpec` shows them
(stored after `ApplyParameters`): a task is matched to its request by resolver and params, since
the request's name is a hash and nothing else on it names the task. The resolved object is in
`status.data`, base64 of its YAML or JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeGuard

import yaml

from controller.core.basics.times import parse_time
from controller.core.model.tekton import PipelineRun

GROUP, VERSION, PLURAL = "resolution.tekton.dev", "v1beta1", "resolutionrequests"
LABEL_RESOLVER = "resolution.tekton.dev/type"
MAX_DATA = 1 << 20  # characters of base64: more than etcd keeps in one object
RESOLVING, RESOLVED, FAILED = "resolving", "resolved", "failed"

# Seconds from a run's creation after which its anchor no longer waits for resolution (and the
# tasks still unresolved count as the policy's unknownTask). Tekton fails a request after a
# minute (config-defaults default-maximum-resolution-timeout), and makes no TaskRun before
# every task is resolved, so a longer hold would not have kept any pod waiting either.
HOLD = 120.0


@dataclass(frozen=True)
class Request:
    resolver: str
    params: str  # canonical JSON of the params by name
    state: str  # RESOLVING, RESOLVED or FAILED
    data: str = ""  # as Tekton wrote it: base64


def _params(params: Any) -> str:
    named = {
        str(p.get("name")): p.get("value")
        for p in params if isinstance(p, Mapping)
    } if isinstance(params, list) else {}
    return json.dumps(named, sort_keys=True, default=str)


def _state(status: Mapping[str, Any]) -> str:
    for cond in status.get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Succeeded":
            if cond.get("status") == "True" and status.get("data"):
                return RESOLVED
            if cond.get("status") == "False":
                return FAILED
    return RESOLVING


def owned_by(objects: Iterable[Mapping[str, Any]], run_uid: str) -> list[Request]:
    """The requests Tekton made for the run (owned by it)."""
    found = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        if not any(isinstance(o, Mapping) and o.get("uid") == run_uid
                   for o in meta.get("ownerReferences") or []):
            continue
        status = obj.get("status") or {}
        data = status.get("data")
        found.append(Request(
            resolver=str((meta.get("labels") or {}).get(LABEL_RESOLVER) or ""),
            params=_params((obj.get("spec") or {}).get("params")),
            state=_state(status),
            data=data if isinstance(data, str) else "",
        ))
    return found


def remote(ref: Any) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(ref, Mapping) and bool(ref.get("resolver"))


def decode(data: str) -> Mapping[str, Any] | None:
    """The resolved object, or None for data that is not one (too large, not base64, not YAML
    or JSON of a mapping)."""
    if not data or len(data) > MAX_DATA:
        return None
    try:
        obj = yaml.safe_load(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError, yaml.YAMLError):
        return None
    return obj if isinstance(obj, Mapping) else None


def _matching(ref: Mapping[str, Any], requests: Iterable[Request]) -> list[Request]:
    key = (str(ref.get("resolver")), _params(ref.get("params")))
    return [r for r in requests if (r.resolver, r.params) == key]


def resolved_spec(ref: Mapping[str, Any], requests: Iterable[Request], kind: str = "Task"
                  ) -> Mapping[str, Any] | None:
    """The spec of the `kind` a remote reference was resolved to, if its request is resolved."""
    for request in _matching(ref, requests):
        obj = decode(request.data) if request.state == RESOLVED else None
        if obj is not None and obj.get("kind") == kind and isinstance(obj.get("spec"), Mapping):
            spec: Mapping[str, Any] = obj["spec"]
            return spec
    return None


def _tasks(run: PipelineRun, named: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    spec = run.substituted_pipeline_spec or named or {}
    return [t for t in [*(spec.get("tasks") or []), *(spec.get("finally") or [])]
            if isinstance(t, Mapping)]


def has_remote(run: PipelineRun, named: Mapping[str, Any] | None = None) -> bool:
    """Whether the run's pipeline, or a task of it, is behind a resolver. `named`: the spec of
    the Pipeline its pipelineRef names, before Tekton has written it into the run's status."""
    return remote(run.spec.get("pipelineRef")) or any(
        remote(t.get("taskRef")) for t in _tasks(run, named)
    )


def pending(run: PipelineRun, requests: Iterable[Request],
            named: Mapping[str, Any] | None = None) -> str | None:
    """What Tekton is still resolving of the run's pipeline and tasks, or None once nothing is
    (Tekton makes TaskRuns only after resolving every task). A request
    that failed is not pending: Tekton fails the run. `named` as for `has_remote`: its taskRef
    params may still hold `$(params...)`, which match no request until Tekton writes the
    substituted pipeline into the run's status."""
    requests = list(requests)
    if run.status.get("childReferences"):
        # Tekton has resolved everything: a request still resolving here is our watch behind
        # Tekton's (its event is on the way); a task matched by no request is not waited for.
        late = any(r.state == RESOLVING for r in requests)
        return "a request the watch has not shown resolved yet" if late else None
    if remote(run.spec.get("pipelineRef")) and not run.pipeline_spec:
        return "its pipeline"
    for task in _tasks(run, named):
        ref = task.get("taskRef")
        if remote(ref) and all(r.state == RESOLVING for r in _matching(ref, requests)):
            return f"task {task.get('name')}"
    return None


def hold_left(created: str | None, now: datetime) -> float | None:
    """Seconds until a run made at `created` (its creationTimestamp) no longer waits for what
    Tekton resolves (at most HOLD; none left once negative); None when that is not known."""
    made = parse_time(created)
    return None if made is None else HOLD - (now - made).total_seconds()
