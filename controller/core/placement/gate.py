"""Pure: the scheduling gate that holds a run's pods until its balloon pod is bound.

The scheduler places a pod tied to a balloon beside the balloon it has only assumed on a node.
When that balloon mounts an unbound claim, both pods then bind the same volume at once: the
pod's binding loses the update race, and the pod waits out the scheduler's backoff (a second
or more) although its node was known. So admission, in either mode, adds this gate to the pods
of a run not marked yet (core/placement/mark.py: the first pods, made before the run's balloon or
with it), and the leader removes it as soon as the balloon pod is bound: the scheduler does not even
queue a gated pod, and sees it once its volumes are bound. The pods made after the mark are,
as a rule, made once the first ones have run, beside a bound balloon: they are not gated.

The gate only ever delays a pod until its anchor is known; where the pod goes is the
affinity's business. So it is removed, whatever else, when the balloon pod is bound, and by a
leader that stops leading (a rollback to a release that does not know it must not find pods
held), and a pod that carries it is never otherwise different from one that does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from controller.core.basics import names
from controller.core.basics.actions import ReleaseGate
from controller.core.placement.memory import Gated, Placeholder

GATE: Final = f"{names.DOMAIN}/anchor"
# Holds the placeholder of Tekton's assistant in an opted-in namespace until the leader has
# given it its run's anchor's node (it mounts the run's claims: elsewhere it would take them).
PLACEHOLDER_GATE: Final = f"{names.DOMAIN}/placeholder"


def held(spec: Mapping[str, Any], name: str = GATE) -> bool:
    """Does the pod carry our gate (or the one named)?"""
    gates = spec.get("schedulingGates")
    return isinstance(gates, list) and any(
        isinstance(g, dict) and g.get("name") == name for g in gates)


def add(spec: Mapping[str, Any], name: str = GATE) -> list[dict[str, Any]]:
    """JSONPatch operations that add the gate (or the one named) to a pod's spec (none if it
    has it)."""
    if held(spec, name):
        return []
    if isinstance(spec.get("schedulingGates"), list):
        return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": name}}]
    return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": name}]}]


HOSTNAME: Final = "kubernetes.io/hostname"


def release(name: str = GATE, hostname: str = "") -> dict[str, Any]:
    """The strategic merge patch that removes the gate (or the one named; by name: others'
    gates stay, and a pod without it is left as it is); `hostname`: and pins the pod to that
    node, in the same update (a gated pod's nodeSelector may be added to, not changed)."""
    spec: dict[str, Any] = {"schedulingGates": [{"name": name, "$patch": "delete"}]}
    if hostname:
        spec["nodeSelector"] = {HOSTNAME: hostname}
    return {"spec": spec}


def release_placeholder(hostname: str, pinned: bool) -> dict[str, Any]:
    """A held placeholder of Tekton's assistant let go: beside its run's anchor (`hostname`:
    the anchor's node's), where it takes the run's claims as the balloon did; as it is for a
    run that gets no balloon (""), or whose pod template pins it to a host already (`pinned`:
    the balloon, made from that template, went there too)."""
    return release(PLACEHOLDER_GATE, "" if pinned else hostname)


def releases(run_uid: str, gated: Iterable[Gated], placeholders: Iterable[Placeholder],
             host: str) -> list[ReleaseGate]:
    """Every held pod of the run let go: its gated pods, then its placeholders (beside its
    anchor, `host`: the anchor's node's hostname, "" while it has none)."""
    return [*(ReleaseGate(g.namespace, g.name, g.uid, release(), run_uid) for g in gated),
            *(ReleaseGate(p.namespace, p.name, p.uid, release_placeholder(host, p.pinned),
                          run_uid) for p in placeholders)]
