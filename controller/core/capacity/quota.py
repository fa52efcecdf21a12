"""Pure: how much of a team namespace's ResourceQuotas and LimitRanges a reservation may take.

What the operator makes in a team's namespace counts against its quota, and a reservation pod
holds its requests for a while before the run's own pods take the room (they preempt it on the
node, but quota admission counts both, and refuses the pod that does not fit: Tekton then
waits a minute before it tries again). So a reservation holds only what the quotas leave free
once every live run of the namespace has made the pods it will still make: for each quota
that counts the reservation pod, and each resource it constrains,

    allowance = hard - used + (the run's own reservation, already in used) - demand

where demand is what the namespace's live runs will still ask beyond what their running pods
hold (counted only where the quota counts the runs' pods too). A quota's scopes say which pods
it counts: a reservation pod runs at the chart's PriorityClass, has no deadline
(NotTerminating) and asks for something (NotBestEffort); Tekton's pods always have a deadline
(Terminating) and run at their pod template's PriorityClass. A LimitRange's maximum caps each
resource of the reservation, and its default requests, which the API server gives a container
for what it does not ask, count too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.core.basics import quantity
from controller.core.basics.notices import Notice
from controller.core.basics.quantity import PODS, Amounts
from controller.core.model.podrequests import defaulted_items

# The quota names of what a pod asks, and the resource each stands for (a reservation's limits
# equal its requests; a run's pods are counted by their requests, which their limits may exceed).
_COUNTED = {"pods": PODS, "count/pods": PODS}
_PREFIXES = ("requests.", "limits.")
_PLAIN = {"cpu", "memory", "ephemeral-storage"}


def resource_of(quota_name: str) -> str | None:
    """The pod resource a quota's resource name counts; None for what pods do not ask
    (storage of claims, counts of other objects)."""
    if quota_name in _COUNTED:
        return _COUNTED[quota_name]
    if quota_name in _PLAIN:
        return quota_name
    for prefix in _PREFIXES:
        if quota_name.startswith(prefix):
            rest = quota_name[len(prefix):]
            return rest if rest != "storage" else None
    return None


@dataclass(frozen=True)
class Shape:
    """What a quota's scopes look at in a pod."""

    priority_class: str = ""
    terminating: bool = False  # activeDeadlineSeconds is set
    best_effort: bool = False  # no requests nor limits at all


RESERVATION = "reservation"
RUN = "run"


def applies(quota: Mapping[str, Any], pod: Shape) -> bool:
    """Does the quota count this pod? (Its spec.scopes and spec.scopeSelector, all of them.)"""
    spec = quota.get("spec") or {}
    for scope in spec.get("scopes") or []:
        if not _scope(str(scope), "Exists", [], pod):
            return False
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        if not isinstance(expr, Mapping):
            continue
        values = [str(v) for v in expr.get("values") or []]
        if not _scope(str(expr.get("scopeName")), str(expr.get("operator")), values, pod):
            return False
    return True


def _scope(name: str, operator: str, values: Sequence[str], pod: Shape) -> bool:
    if name == "PriorityClass":
        has = bool(pod.priority_class)
        return {
            "In": has and pod.priority_class in values,
            "NotIn": not has or pod.priority_class not in values,
            "Exists": has,
            "DoesNotExist": not has,
        }.get(operator, True)
    matched = {
        "Terminating": pod.terminating,
        "NotTerminating": not pod.terminating,
        "BestEffort": pod.best_effort,
        "NotBestEffort": not pod.best_effort,
        # A reservation's and Tekton's pods name no namespaces in their affinity terms.
        "CrossNamespacePodAffinity": False,
    }.get(name, True)
    return matched if operator in ("Exists", "In") else not matched


@dataclass(frozen=True)
class Allowance:
    """Per resource, the most a run's reservation may ask (absent: no limit), and why."""

    most: Amounts = field(default_factory=dict)
    why: Mapping[str, str] = field(default_factory=dict)  # resource -> the object that bounds it

    def cap(self, size: Mapping[str, int]) -> Amounts:
        return {r: min(a, self.most.get(r, a)) for r, a in size.items()}


def allowance(
    quotas: Sequence[Mapping[str, Any]],
    limit_ranges: Sequence[Mapping[str, Any]],
    reservation: Shape,
    runs: Shape,
    own: Mapping[str, int],
    demand: Mapping[str, int],
) -> Allowance:
    """`own`: the run's reservation as it is now (counted in the quotas' used); `demand`: what
    the namespace's live runs will still ask beyond what their running pods hold."""
    most: Amounts = {}
    why: dict[str, str] = {}

    def bound(resource: str, amount: int, by: str) -> None:
        if resource not in most or amount < most[resource]:
            most[resource] = max(amount, 0)
            why[resource] = by

    for q in quotas:
        if not applies(q, reservation):
            continue
        name = str((q.get("metadata") or {}).get("name") or "")
        status = q.get("status") or {}
        hard = _amounts(status.get("hard") or (q.get("spec") or {}).get("hard"))
        used = _amounts(status.get("used"))
        counts_runs = applies(q, runs)
        for key, limit in hard.items():
            resource = resource_of(key)
            if resource is None:
                continue
            if key not in used:  # not counted yet by the quota controller: hold nothing
                bound(resource, 0, f"ResourceQuota {name}")
                continue
            left = limit - used[key] + own.get(resource, 0)
            bound(resource, left - (demand.get(resource, 0) if counts_runs else 0),
                  f"ResourceQuota {name}")
    for lr in limit_ranges:
        name = str((lr.get("metadata") or {}).get("name") or "")
        for item in (lr.get("spec") or {}).get("limits") or []:
            if isinstance(item, Mapping) and item.get("type") in ("Container", "Pod"):
                for resource, amount in _amounts(item.get("max")).items():
                    bound(resource, amount, f"LimitRange {name}")
    return Allowance(most, why)


def _amounts(resources: Any) -> Amounts:
    """Quantities that parse; one that does not is left out (the API server would not have
    stored it)."""
    out: Amounts = {}
    for key, value in (resources or {}).items() if isinstance(resources, Mapping) else ():
        try:
            out[str(key)] = quantity.parse(value)
        except ValueError:
            continue
    return out


def sized(
    want: Mapping[str, int], allowed: Allowance, limit_ranges: Sequence[Mapping[str, Any]]
) -> Amounts | None:
    """The reservation that fits the allowance: each resource capped; None when not even a
    reservation pod fits (no pod slot left, or a default request the LimitRanges would add
    that the quota has no room for)."""
    if allowed.most.get(PODS, 1000) < 1000:
        return None
    size = {r: a for r, a in allowed.cap(want).items() if r != PODS and a > 0}
    for item in defaulted_items(limit_ranges):
        for resource, least in item["min"].items():
            if 0 < size.get(resource, least) < least:
                if least > allowed.most.get(resource, least):
                    return None
                size[resource] = least  # the LimitRange's minimum, which the quota holds
        for resource, amount in item["defaultRequest"].items():
            if resource not in size and amount > allowed.most.get(resource, amount):
                return None  # the API server would give it what the quota cannot hold
    return size


def limited(want: Mapping[str, int], size: Mapping[str, int] | None,
            allowed: Allowance) -> Notice | None:
    """Normal: what of the run's peak is not reserved, and which quota or LimitRange keeps
    it; None when all of it is."""
    got = size or {}
    short = sorted(r for r, a in want.items() if r != PODS and got.get(r, 0) < a)
    if size is not None and not short:
        return None
    bounds = sorted({allowed.why[r] for r in (short or [PODS]) if r in allowed.why})
    reserved = quantity.describe(got) if size else "nothing"
    return Notice(
        "RoomLimited",
        f"the run's peak ({quantity.describe(want)}) is reserved only in part: {reserved}, "
        f"because of {', '.join(bounds) or 'the namespace quota'}; what the namespace's quota "
        "leaves free is kept for the pods its runs will still make, so that none of them is "
        "refused because of the reservation",
        warning=False,
    )
