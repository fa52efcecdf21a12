"""Pure: what the nodes a run may use can ever hold, and whether an autoscaler can add more.

A reservation asks for the run's peak so that the scheduler anchors the run where it fits. A
peak larger than every node the run's constraints allow (their allocatable, whatever runs on
them now) fits nowhere, ever: waiting for room is worth it only if an autoscaler can add a
node that could hold it. Otherwise the run is anchored at once where the largest share of its
peak fits, and its widest layer takes turns there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from controller.core.basics import quantity
from controller.core.basics.quantity import PODS, Amounts
from controller.core.capacity import nodes
from controller.core.model import podrequests

# Labels Karpenter puts on every node it makes, whatever its NodePool says.
_KARPENTER_SETS = {"kubernetes.io/hostname", "karpenter.sh/nodepool"}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _expression_matches(expr: Mapping[str, Any], value: str | None) -> bool:
    operator, values = expr.get("operator"), [str(v) for v in expr.get("values") or []]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def selected(node: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> bool:
    """Do the pod's nodeSelector and required node affinity select the node?"""
    labels = _labels(node)
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    name = str((node.get("metadata") or {}).get("name") or "")
    return any(
        all(_expression_matches(e, labels.get(e.get("key"))) for e in t.get("matchExpressions")
            or [])
        and all(_expression_matches(e, name) for e in t.get("matchFields") or []
                if e.get("key") == "metadata.name")
        for t in terms if isinstance(t, Mapping)
    )


def eligible(node: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> bool:
    """May a pod of this spec go to the node now (selected, schedulable, Ready, taints
    tolerated)?"""
    tolerations = [t for t in pod_spec.get("tolerations") or [] if isinstance(t, Mapping)]
    return selected(node, pod_spec) and nodes.unavailable(node, tolerations) is None


def allocatable(node: Mapping[str, Any]) -> Amounts:
    try:
        return quantity.amounts((node.get("status") or {}).get("allocatable"))
    except ValueError:
        return {}


def _covered(peak: Mapping[str, int], share: Mapping[str, int]) -> Fraction:
    """How much of the peak the share holds: its smallest fraction over the resources."""
    parts = [Fraction(share.get(r, 0), a) for r, a in peak.items() if r != PODS and a > 0]
    return min(parts, default=Fraction(1))


def largest_share(
    peak: Mapping[str, int], all_nodes: Iterable[Mapping[str, Any]], pod_spec: Mapping[str, Any]
) -> Amounts | None:
    """The most of the peak one node the pod (the balloon) may use can ever hold beside it,
    where no such node can hold all of it; None where one can, or where none is known."""
    beside = podrequests.of_pod({"spec": pod_spec})
    best: tuple[Fraction, int, Amounts] | None = None
    for node in all_nodes:
        if not eligible(node, pod_spec):
            continue
        room = quantity.minus(allocatable(node), beside)
        share = {r: min(a, room.get(r, 0)) for r, a in peak.items() if r != PODS}
        covered = _covered(peak, share)
        if covered >= 1:
            return None
        rank = (covered, sum(share.values()), share)
        if best is None or rank[:2] > best[:2]:
            best = rank
    return dict(best[2]) if best is not None else None


def nodepool_may_hold(
    nodepool: Mapping[str, Any], pod_spec: Mapping[str, Any], peak: Mapping[str, int]
) -> bool:
    """Could this Karpenter NodePool make a node the pod may use, within its limits? Its
    template's labels and requirements must allow the pod's nodeSelector, its taints must be
    tolerated, and what it may still add must hold the peak. (Which instance sizes it offers is
    Karpenter's to know: a NodePool that may make the node at all is taken to be able to.)"""
    spec = nodepool.get("spec") or {}
    template = spec.get("template") or {}
    labels = _labels(template)
    requirements = [r for r in (template.get("spec") or {}).get("requirements") or []
                    if isinstance(r, Mapping)]
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if key in _KARPENTER_SETS:
            continue
        if key in labels:
            if labels[key] != value:
                return False
            continue
        about = [r for r in requirements if r.get("key") == key]
        if not about or not all(_expression_matches(r, str(value)) for r in about):
            return False
    tolerations = [t for t in pod_spec.get("tolerations") or [] if isinstance(t, Mapping)]
    for taint in (template.get("spec") or {}).get("taints") or []:
        if isinstance(taint, Mapping) and taint.get("effect") in nodes.BLOCKING_EFFECTS and (
                not nodes.tolerated(taint, tolerations)):
            return False
    try:
        limits = quantity.amounts(spec.get("limits"))
        used = quantity.amounts((nodepool.get("status") or {}).get("resources"))
    except ValueError:
        return True
    return all(limits[r] - used.get(r, 0) >= a for r, a in peak.items() if r in limits)


def autoscaler_may_add(
    nodepools: Sequence[Mapping[str, Any]], pod_spec: Mapping[str, Any],
    peak: Mapping[str, int], cluster_autoscaler: bool,
) -> bool:
    """Can an autoscaler add a node for the peak? Cluster Autoscaler's node groups are not
    visible here: where it runs, it is taken to be able to."""
    return cluster_autoscaler or any(nodepool_may_hold(p, pod_spec, peak) for p in nodepools)
