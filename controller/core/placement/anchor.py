"""Pure: when a run's anchor node becomes unavailable, does the anchor move, or stay and say why?

The anchor moves when it may, and only then (DESIGN section 9): no pod of the run still runs on
the node, and every claim of the run can follow (not yet bound, or bound to a volume whose
topology is wider than the node). Moving is deleting the balloon pod: its StatefulSet makes a
new one, the scheduler places it, and the run's pending pods follow, since their term selects
the balloon, not a node. A running task is never separated from its volume.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.basics.notices import Notice
from controller.core.model.pods import HOSTNAME, RunPod


class Mobility(enum.StrEnum):
    UNBOUND = "unbound"  # WaitForFirstConsumer, not yet bound: binds wherever the anchor goes
    FOLLOWS = "follows"  # bound to a volume reachable from other nodes (zonal, networked)
    NODE_LOCAL = "node-local"  # bound to a volume on this node only


def claim_mobility(
    pvc: Mapping[str, Any] | None, pv: Mapping[str, Any] | None, node: str
) -> Mobility:
    if pvc is None or not (pvc.get("spec") or {}).get("volumeName"):
        return Mobility.UNBOUND
    if pv is None:
        return Mobility.FOLLOWS  # bound, but its volume is not visible to us: assume networked
    # The volume's node affinity says where it can be used (a local PV must have one; a
    # cloud disk's names its zone): pinned to this one node, it cannot follow.
    spec = pv.get("spec") or {}
    terms = ((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
    for term in terms or []:
        for expr in (term or {}).get("matchExpressions") or []:
            if (
                expr.get("key") == HOSTNAME
                and expr.get("operator") == "In"
                and list(expr.get("values") or []) == [node]
            ):
                return Mobility.NODE_LOCAL
    return Mobility.FOLLOWS


@dataclass(frozen=True)
class Situation:
    run: str
    node: str
    # Why the node cannot keep the anchor (nodes.unavailable): cordoned, NotReady, deleted,
    # tainted ...
    reason: str
    pods: Sequence[RunPod]
    claims: Mapping[str, Mobility]


class Verb(enum.StrEnum):
    MOVE = "move"
    STAY = "stay"


@dataclass(frozen=True)
class Decision:
    verb: Verb
    # Delete the balloon pod at once, without grace: its node will not confirm a graceful end.
    force: bool = False
    notice: Notice | None = None


def decide(s: Situation) -> Decision:
    holding = sorted(p.name for p in s.pods if p.node == s.node and p.holds_the_node)
    local = sorted(name for name, m in s.claims.items() if m is Mobility.NODE_LOCAL)
    if not holding and not local:
        return Decision(Verb.MOVE, force=s.reason in ("NotReady", "deleted"))
    why = []
    frees = []
    if holding:
        why.append(f"pod(s) {', '.join(holding)} of the run still run there")
        frees.append("those pods end")
    if local:
        why.append(f"claim(s) {', '.join(local)} live on volumes of that node only")
        frees.append(_node_back(s.reason))
    return Decision(
        Verb.STAY,
        notice=Notice(
            "AnchorNodeUnavailable",
            f"the run's anchor node {s.node} is {s.reason}, but the anchor cannot move: "
            f"{'; '.join(why)}. It moves once {' and '.join(frees)}; until then pods of the "
            "run that are not yet placed wait for it",
        ),
    )


def _node_back(reason: str) -> str:
    if reason == "cordoned":
        return "the node is uncordoned (or the claims are deleted)"
    if reason.startswith("tainted"):
        return "the taint is removed (or the claims are deleted)"
    if reason == "deleted":
        return "the claims are deleted (their volumes went with the node)"
    return "the node is Ready again (or the claims are deleted)"


def moved_notice(old: str, new: str, reason: str) -> Notice:
    """Said once the new balloon pod is bound: the anchor followed the run to a new node."""
    return Notice(
        "AnchorMoved",
        f"the run's anchor moved from node {old} ({reason}) to node {new}; the run's pods "
        "that are not yet placed go there",
        warning=False,
    )
