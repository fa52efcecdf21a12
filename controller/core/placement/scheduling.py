"""Scheduling constraints that the pods of a run will carry, and how the balloon inherits them.

Pure. Tekton (v1.15, pod.MergePodTemplateWithDefault) merges pod templates field by field: a
field the higher template sets replaces the lower one's whole; volumes and env merge by name.
An empty `{}` or `[]` counts as not set: Tekton's own admission webhook drops empty fields
(omitempty on a round trip) before its reconcilers merge, so in a cluster they never override.
A task's `taskRunSpecs[].podTemplate` is merged over the run's `taskRunTemplate.podTemplate`,
which is merged over the cluster default. So tasks of one run may carry different constraints,
and the balloon must go only where every one of them can follow: the union of their node
selectors, all their required node affinities, and only the tolerations they all carry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The pod-template fields that decide where a pod may run, or that the balloon borrows.
_FIELDS = (
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "imagePullSecrets",
    "runtimeClassName",
    "topologySpreadConstraints",
)


@dataclass(frozen=True)
class Constraints:
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    node_affinity: Mapping[str, Any]
    priority_class_name: str | None
    image_pull_secrets: tuple[Mapping[str, Any], ...]


def _set(template: Mapping[str, Any], name: str) -> Any:
    value = template.get(name)
    return value if value not in (None, {}, [], "") else None


def effective_template(
    default: Mapping[str, Any] | None, run: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Tekton's merge: each field from the higher template if set, else from the lower one;
    volumes by name."""
    lower, higher = default or {}, run or {}
    out: dict[str, Any] = {}
    for name in _FIELDS:
        value = _set(higher, name)
        if value is None:
            value = _set(lower, name)
        if value is not None:
            out[name] = value
    volumes = {
        v["name"]: v
        for v in [*(lower.get("volumes") or []), *(higher.get("volumes") or [])]
        if isinstance(v, dict) and isinstance(v.get("name"), str)
    }
    if volumes:
        out["volumes"] = list(volumes.values())
    return out


def pod_templates(
    default: Mapping[str, Any] | None,
    run: Mapping[str, Any] | None,
    tasks: Mapping[str, Mapping[str, Any]],
    task_names: Iterable[str] | None,
) -> list[dict[str, Any]]:
    """The distinct effective pod templates of the run's pods: one per task with its own
    (taskRunSpecs), and the run's for the other tasks, unless every task is known to have its
    own (task_names: the pipeline's tasks and finally tasks, None while unknown)."""
    base = effective_template(default, run)
    out = [effective_template(base, t) for t in tasks.values()]
    if task_names is None or any(name not in tasks for name in task_names):
        out.append(base)
    unique: list[dict[str, Any]] = []
    for template in out:
        if template not in unique:
            unique.append(template)
    return unique or [base]


def covers(wide: Mapping[str, Any], narrow: Mapping[str, Any]) -> bool:
    """Does toleration `wide` tolerate every taint that `narrow` tolerates?"""
    if wide.get("effect") and wide.get("effect") != narrow.get("effect"):
        return False
    if not wide.get("key"):
        return (wide.get("operator") or "Equal") == "Exists"
    if wide.get("key") != narrow.get("key"):
        return False
    if (wide.get("operator") or "Equal") == "Exists":
        return True
    return (narrow.get("operator") or "Equal") != "Exists" and (wide.get("value") or "") == (
        narrow.get("value") or ""
    )


def common_tolerations(
    lists: Sequence[Sequence[Mapping[str, Any]]],
) -> tuple[Mapping[str, Any], ...]:
    """The tolerations every list carries (each taint they let through, all let through)."""
    if not lists:
        return ()
    candidates = union(t for tolerations in lists for t in tolerations)
    return tuple(c for c in candidates if all(any(covers(u, c) for u in ts) for ts in lists))


def constraints_of(template: Mapping[str, Any]) -> Constraints:
    selector = template.get("nodeSelector")
    tolerations = template.get("tolerations")
    affinity = template.get("affinity")
    secrets = template.get("imagePullSecrets")
    pcn = template.get("priorityClassName")
    return Constraints(
        node_selector=(
            {k: v for k, v in selector.items() if isinstance(v, str)}
            if isinstance(selector, dict)
            else {}
        ),
        tolerations=tuple(t for t in tolerations or () if isinstance(t, dict))
        if isinstance(tolerations, list)
        else (),
        node_affinity=(affinity.get("nodeAffinity") or {} if isinstance(affinity, dict) else {}),
        priority_class_name=pcn if isinstance(pcn, str) and pcn else None,
        image_pull_secrets=tuple(s for s in secrets if isinstance(s, dict))
        if isinstance(secrets, list)
        else (),
    )


@dataclass(frozen=True)
class Combined:
    """What the balloon must carry so that every pod of the run can follow it."""

    node_selector: Mapping[str, str]
    conflicts: tuple[str, ...]
    tolerations: tuple[Mapping[str, Any], ...]
    node_affinity: Mapping[str, Any]
    runtime_class: str | None
    # Constraints of the run's pods that may keep them off their anchor's node: said, not fixed.
    cautions: tuple[str, ...]


def combine(templates: Sequence[Mapping[str, Any]]) -> Combined:
    each = [constraints_of(t) for t in templates]
    node_selector, conflicts = merge_selectors(*(c.node_selector for c in each))
    runtimes = sorted({str(t.get("runtimeClassName") or "") for t in templates})
    cautions = []
    if len(runtimes) > 1:
        named = ", ".join(r or "(none)" for r in runtimes)
        cautions.append(
            f"tasks run with different RuntimeClasses ({named}): the balloon carries none of "
            "their scheduling rules"
        )
    for t in templates:
        affinity = t.get("affinity") if isinstance(t.get("affinity"), dict) else {}
        if ((affinity or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ):
            cautions.append("a pod template requires podAntiAffinity, which may keep a task off "
                            "the node its run shares")
        spread = t.get("topologySpreadConstraints")
        if isinstance(spread, list) and any(
            isinstance(c, dict) and c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
            for c in spread
        ):
            cautions.append("a pod template spreads pods (topologySpreadConstraints, "
                            "DoNotSchedule), which contradicts putting them on one node")
    return Combined(
        node_selector=node_selector,
        conflicts=tuple(conflicts),
        tolerations=common_tolerations([c.tolerations for c in each]),
        node_affinity=and_node_affinity(*(c.node_affinity for c in each)),
        runtime_class=runtimes[0] or None if len(runtimes) == 1 else None,
        cautions=tuple(dict.fromkeys(cautions)),
    )


def merge_selectors(*selectors: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Union of node selectors; keys asked with two values are returned as conflicts."""
    merged: dict[str, str] = {}
    conflicts = []
    for selector in selectors:
        for key, value in selector.items():
            if key in merged and merged[key] != value:
                conflicts.append(f"{key} is both {merged[key]!r} and {value!r}")
            else:
                merged[key] = value
    return merged, conflicts


def union(items: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    out: list[Mapping[str, Any]] = []
    for item in items:
        if item not in out:
            out.append(item)
    return tuple(out)


def and_node_affinity(*parts: Mapping[str, Any]) -> dict[str, Any]:
    """A nodeAffinity that requires every part's required terms (terms are ORed inside one)."""
    required: list[dict[str, Any]] | None = None
    preferred: list[Any] = []
    for part in parts:
        terms = (part.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
            "nodeSelectorTerms"
        )
        if isinstance(terms, list) and terms:
            required = _and_terms(required, terms)
        pref = part.get("preferredDuringSchedulingIgnoredDuringExecution")
        if isinstance(pref, list):
            preferred.extend(p for p in pref if p not in preferred)
    out: dict[str, Any] = {}
    if required is not None:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
    if preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return out


def _and_terms(left: list[dict[str, Any]] | None, right: Sequence[Any]) -> list[dict[str, Any]]:
    right_terms = [t for t in right if isinstance(t, dict)]
    if left is None:
        return [dict(t) for t in right_terms]
    out = []
    for a in left:
        for b in right_terms:
            term: dict[str, Any] = {}
            for key in ("matchExpressions", "matchFields"):
                exprs = list(a.get(key) or []) + [
                    e for e in b.get(key) or [] if e not in (a.get(key) or [])
                ]
                if exprs:
                    term[key] = exprs
            out.append(term)
    return out
