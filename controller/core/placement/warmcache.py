"""Pure: warm caches. A namespace's policy may ask that the runs of one pipeline prefer the node
where that pipeline's previous run in the namespace was anchored, so that what the last run
left on the node (a Task volume on a host path, a local PersistentVolume per node) is warm
for the next one.

A run's pipeline is identified, in this order, by
- the value of a label the policy names (`spec.warm.pipelineKey`), when the run carries it;
- the Pipeline it names (`pipelineRef.name`, a Pipeline of its namespace);
- what a resolver fetches it from (`pipelineRef.resolver` and its params, hashed);
- its inline `pipelineSpec`, hashed (runs made from one template share it; their params differ).
Tekton's own `tekton.dev/pipeline` label is not used: Tekton writes it after its first
reconcile (often after the anchor is chosen), and for an inline spec it names the run.

Where each pipeline's last run was anchored is kept in the status of the namespace's
CoschedulingPolicy (`status.warmNodes`: key -> node, run, time): an object of the cluster,
which a restart or a new leader reads back as it was, and which `kubectl get cspol -o yaml`
shows. At most KEEP pipelines are remembered a namespace, the most recent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from controller.core.model.tekton import PipelineRun

KEEP = 100
STATUS_FIELD = "warmNodes"


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def pipeline_key(run: PipelineRun, label: str = "") -> str:
    """The run's pipeline, as warm caches know it ("" when nothing identifies it)."""
    if label and run.labels.get(label):
        return run.labels[label]
    ref = run.spec.get("pipelineRef")
    if isinstance(ref, Mapping):
        if ref.get("resolver"):
            return f"{ref['resolver']}:{_digest(ref.get('params') or [])}"
        if ref.get("name"):
            return str(ref["name"])
    spec = run.spec.get("pipelineSpec")
    return f"inline:{_digest(spec)}" if isinstance(spec, Mapping) and spec else ""


def remembered(status: Mapping[str, Any] | None) -> dict[str, str]:
    """Each pipeline's last anchor node, from a policy's status."""
    entries = (status or {}).get(STATUS_FIELD)
    if not isinstance(entries, Mapping):
        return {}
    return {str(k): str(v.get("node")) for k, v in entries.items()
            if isinstance(v, Mapping) and v.get("node")}


def remember(status: Mapping[str, Any] | None, key: str, node: str, run: str,
             now: str) -> dict[str, Any]:
    """The merge patch of the policy's status that remembers `node` for `key` (and forgets the
    oldest pipelines beyond KEEP). Other keys are left to the merge: runs anchored at once each
    write their own."""
    entries = (status or {}).get(STATUS_FIELD)
    known = dict(entries) if isinstance(entries, Mapping) else {}
    known.pop(key, None)
    patch: dict[str, Any] = {key: {"node": node, "run": run, "time": now}}
    ordered = sorted(known, key=lambda k: str((known[k] or {}).get("time") or "")
                     if isinstance(known[k], Mapping) else "")
    for stale in ordered[: max(0, len(known) + 1 - KEEP)]:
        patch[stale] = None
    return {STATUS_FIELD: patch}
