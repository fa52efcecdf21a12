"""A placeholder of Tekton's assistant that admission held (the scheduling gate
`tekton-coscheduler.dev/placeholder`), handed to the operator: from the pod watch (faces/streams.py)
and from the resync (faces/resync.py), which finds those the watch could not show this leader.

The pod watch drops the events of namespaces not opted in before decoding them. A placeholder held
while its namespace was opted in, whose namespace was switched off before this leader saw it (a
leader that crashed without handing over, or an admission replica whose view still had the label),
would otherwise stay held for good: its run, not ours, gets no balloon, and nothing here knew of
the pod. The resync lists the placeholders not scheduled in its first round and in the rounds after
a namespace is switched off (`listing`), and puts each held one it does not know under its run's
key; the run's look then lets it go (Gates.forget: a run that gets no balloon).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from controller.core.model import assistant
from controller.core.placement import gate
from controller.kube.client import Kube
from controller.operator.runs import Operator

# submit(run uid, body, listed): a look at the run on the work queue (faces/resync.Submit).
Submit = Callable[[str, Mapping[str, Any], bool], None]


def seen(op: Operator, kube: Kube, submit: Submit, pod: Mapping[str, Any], run_name: str,
         deleted: bool = False) -> None:
    """A placeholder of the run named `run_name`. Its run is found by name among the live runs,
    else asked of the API server; one that waits for its anchor has its run looked at, whose
    decision lets it go if no balloon comes. One of a run that is gone goes with its run."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    uid = op.live.named(namespace, run_name)
    if not uid and (deleted or not gate.held(pod.get("spec") or {}, gate.PLACEHOLDER_GATE)):
        return  # nothing of it held here
    body = op.live.get(uid) if uid else kube.get_pipelinerun(namespace, run_name)
    if body is None:
        return  # its run is gone: it goes with it
    uid = str((body.get("metadata") or {}).get("uid") or "")
    if uid and op.gates.on_placeholder(pod, uid, deleted):
        submit(uid, body, True)


def held_unknown(op: Operator, pods: Sequence[Mapping[str, Any]]
                 ) -> list[tuple[str, str, Mapping[str, Any]]]:
    """Of the placeholders listed, those held that no run's memory holds: (the key to put it
    under, its run's name, the pod); the key is its run's uid when the run is live, else the
    pod's own (as the pod watch keys it)."""
    known = {p.uid for _, m in op.memory.items(lambda m: m.placeholders) for p in m.placeholders}
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        run_name = assistant.placeholder_run(meta.get("labels") or {})
        pod_uid = str(meta.get("uid") or "")
        if (run_name and pod_uid not in known
                and gate.held(pod.get("spec") or {}, gate.PLACEHOLDER_GATE)):
            key = op.live.named(str(meta.get("namespace") or ""), run_name) or pod_uid
            out.append((key, run_name, pod))
    return out


class Listing:
    """Whether a resync round lists the placeholders not scheduled: the first round of a leader,
    and the two rounds after a namespace was switched off (an admission replica's view may lag
    the leader's by a moment: a placeholder held then comes after the first of them)."""

    def __init__(self) -> None:
        self._enabled: frozenset[str] | None = None
        self._left = 0  # rounds still to list

    def round(self, first: bool, enabled: frozenset[str]) -> bool:
        if self._enabled is not None and self._enabled - enabled:
            self._left = 2
        elif first:
            self._left = max(self._left, 1)
        self._enabled = enabled
        listing, self._left = self._left > 0, max(0, self._left - 1)
        return listing
